// Troupe's YAML files, read with yaml-cpp into the core's types.
//
// Config (--config), every key optional:
//   listen: 127.0.0.1:8888          # overridden by --listen
//   maxBodyBytes: 67108864          # larger extender requests get HTTP 413
//   logLevel: info                  # debug | info | warn | error
//   policy:
//     name: troupe                  # any registered policy: troupe, fgd, best-fit, dot-product,
//                                   # gpu-packing, gpu-clustering, random, kube, binpack, spread
//     weights: {pack: 0.5, topology: 0.4, domains: 0.1, balance: 1}   # the troupe policy's arguments
//   filter:
//     narrowTo: best                # best: pass only the policy's best node | all (default)
//   topology:
//     preset: default               # default | nvidia-nvl72 | nvidia-topograph | gke | aws
//                                   # (model/topology_presets.h); levels, when given, win
//     levels:                       # node label keys, widest first; [] turns them off
//       - topology.kubernetes.io/zone   # (the default: zone, block, rack)
//       - troupe.dev/block
//       - troupe.dev/rack
//   gang:
//     timeout: 5m                   # default of the troupe.dev/gang-timeout annotation
//     maxTimeout: 5m                # longer annotations are capped; keep it below
//                                   # kube-scheduler's extender httpTimeout
//     maxGangs: 10000               # gangs tracked at once; more are refused with a reason
//   metrics:
//     perNodeSeries: auto           # troupe_node_gpus: auto (on below perNodeSeriesOffAt GPU
//                                   # nodes) | on | off; aggregates are always exported
//     perNodeSeriesOffAt: 1000      # auto: off at this many GPU nodes and more
//   schedulerNames: [troupe-scheduler]  # Kubernetes mode: bind only pods of these profiles
//   dra:                            # Kubernetes mode: GPUs a DRA driver serves (docs/dra.md)
//     gpuDrivers: [gpu.nvidia.com]  # ResourceSlice drivers whose devices are whole GPUs
//     gpuDeviceClasses: [gpu.nvidia.com]  # DeviceClasses a claim asks GPUs of
//   binder:
//     workers: 8                    # Kubernetes mode: Bindings in flight at once (1-256)
//   learnedNodes:                   # learn mode only (neither --cluster nor the API)
//     maxNodes: 10000               # nodes kept from request bodies at most
//     ttlSeconds: 3600              # forgotten when no request carried them this long
//   limits:                         # the HTTP server's (docs/security.md, Limits); defaults shown
//     maxHeaderBytes: 65536         # request line + headers; more is 431
//     maxBodyBytesInFlight: 134217728   # bodies being read or handled at once; more is 503
//     maxConnections: 1024          # per port; at the cap a new one closes an idle one
//     headerTimeoutSeconds: 10      # a request's header, from its first byte (or the connection)
//     readTimeoutSeconds: 60        # a whole request, header and body
//     idleTimeoutSeconds: 120       # a kept-alive connection between requests
//     writeTimeoutSeconds: 60       # writing one answer
//   queues:                         # batch queues (docs/queues.md)
//     default: default              # the queue of pods that name none (nor does their namespace)
//     minRuntime: 5m                # a pod may be reclaimed only after running this long
//     reclaim: true                 # evict pods of queues above their fair share for queues
//                                   # below their guarantee; false: admission and fair share only
//     reclaimTimeout: 2m            # a reclaim not done by then is given up (and may be planned again)
//     definitions: []               # the queues, each with a Queue's spec fields and its name;
//                                   # Kubernetes mode: the Queue objects replace them once listed
//     # definitions:
//     #   - name: research
//     #     weight: 2               # > 0, default 1
//     #     guaranteed: {gpus: 8}   # GPUs: 8, "2.5" or "500m"; absent: nothing guaranteed
//     #     limit: {gpus: 32, products: {NVIDIA-H100-80GB-HBM3: 16}}   # absent: no limit
//     #     preemptible: true       # default true
//     #   - {name: vision, parent: research}
//   defrag:                         # Kubernetes mode: live defragmentation advice (docs/defrag.md)
//     enabled: true                 # DefragAdvice events and the troupe_defrag_advice_* gauges
//     interval: 30s                 # how often the active replica plans
//     minGpus: 4                    # pods on their own asking fewer GPUs get no advice (gangs do)
//     minPending: 60s               # only for pods pending at least this long
//     maxMoves: 4                   # moves of running pods per plan (1-16)
//     evict: false                  # true: evict the planned pods (Eviction API, dry runs first)
//
// Cluster (--cluster), the nodes of standalone mode:
//   nodes:
//     - name: h100-0
//       gpus: 8                     # allocatable nvidia.com/gpu
//       labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, nvidia.com/gpu.memory: "81559"}
//       annotations: {}             # e.g. troupe.dev/gpu-topology
//       cpu: "96"                   # optional; tracked only when given
//       memory: 1Ti
//       pods: 110
//       replicas: 4                 # optional: h100-0 .. h100-3 from one entry
//
// Unknown keys are errors. Every error names the file, the line and the key.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "adapters/common/defrag_options.h"
#include "adapters/common/dra_options.h"
#include "adapters/common/per_node_series.h"
#include "troupe/common/status.h"
#include "troupe/model/node.h"
#include "troupe/model/topology_levels.h"
#include "troupe/model/topology_presets.h"
#include "troupe/sched/cluster/node_learner.h"
#include "troupe/sched/gang/gang_settings.h"
#include "troupe/sched/policies/policy_args.h"
#include "troupe/sched/queue/queue_spec.h"
#include "troupe/sched/queue/reclaim_settings.h"

namespace troupe::config {

// The HTTP server's limits; the same defaults as http::ServerLimits.
struct ServerLimitsConfig {
  size_t max_header_bytes = 64 << 10;
  size_t max_body_bytes_in_flight = 128 << 20;
  size_t max_connections = 1024;
  double header_timeout_seconds = 10;
  double read_timeout_seconds = 60;
  double idle_timeout_seconds = 120;
  double write_timeout_seconds = 60;
};

// queues: the standalone definitions and the reclaim settings of every mode.
struct QueuesConfig {
  std::string default_queue = sched::kDefaultQueueName;
  sched::ReclaimSettings reclaim;  // minRuntime, reclaim, reclaimTimeout: the core takes it as it is
  // Checked as a tree when read (QueueTree::build): a definition the tree refuses is an error
  // naming its line, so the file never starts Troupe with a queue its pods cannot use.
  std::vector<sched::QueueSpec> definitions;
};

// defrag: the live defragmentation advice (Kubernetes mode), as the kube adapter takes it.
using DefragConfig = adapters::DefragOptions;

struct ServeConfig {
  std::string listen = "127.0.0.1:8888";
  size_t max_body_bytes = 64 << 20;
  std::string log_level = "info";
  sched::PolicyChoice policy;   // resolved through sched::builtinPolicies()
  bool narrow_to_best = false;  // filter.narrowTo: best
  std::vector<std::string> topology_levels = model::defaultTopologyLevels();
  std::string topology_preset = "default";  // the preset named (explicit levels replace its levels)
  sched::GangSettings gang;                 // the core takes it as it is
  adapters::PerNodeSeries per_node_series;
  std::vector<std::string> scheduler_names = {"troupe-scheduler"};
  adapters::DraOptions dra;  // the kube adapter takes it as it is
  // Kubernetes mode: Bindings in flight at once (binder.workers); each worker sends one.
  int bind_workers = 8;
  // learnedNodes (maxNodes, ttlSeconds), as the core takes it; `enabled` is not a key: the mode
  // decides it (serve turns it off when --cluster or the API provides the nodes).
  sched::NodeLearning learned_nodes;
  ServerLimitsConfig limits;
  QueuesConfig queues;
  DefragConfig defrag;
};

// A kube-scheduler profile name as spec.schedulerName holds it: a DNS subdomain. The error
// says what is wrong.
Status checkSchedulerName(const std::string& name);

// "best" -> true, "all" -> false; anything else is an error that says what is accepted.
Result<bool> parseNarrowTo(const std::string& value);

// The whole config as YAML, every key written, in the form parseServeConfig reads back to an
// equal ServeConfig (`troupe serve --print-config`). ServeConfig's member initialisers (with
// those of the section structs it holds) are the one place a default is defined; scripts/check-defaults.py
// compares the chart, deploy/, examples/ and the README against this output of the defaults.
std::string formatServeConfig(const ServeConfig& config);

// "auto" | "on" | "off" (metrics.perNodeSeries, --per-node-metrics); anything else is an error
// that says what is accepted.
Result<adapters::PerNodeSeries::Mode> parsePerNodeSeries(const std::string& value);

Result<ServeConfig> loadServeConfig(const std::string& path);
Result<ServeConfig> parseServeConfig(const std::string& text, const std::string& source_name);

Result<std::vector<model::NodeFacts>> loadCluster(const std::string& path);
Result<std::vector<model::NodeFacts>> parseCluster(const std::string& text, const std::string& source_name);

}  // namespace troupe::config
