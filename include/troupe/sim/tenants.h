// The queueing simulation (`troupe simulate --tenants`): trace pods arrive at their creation
// time (compressed by a load factor), run for their trace duration, wait while nothing fits,
// and leave when done. Pods belong to tenants (queues); two orderings of the waiting pods run
// side by side on the same workload:
//   fifo        kube-scheduler's order: at every event each waiting pod is tried in arrival
//               order and takes its place when it fits (no head-of-line blocking);
//   fair-share  the tenants are served lowest (dominant share / fair share) first, their pods
//               in arrival order, and the core's QueueBook (admit / refresh, the live filter's
//               own code) decides whether a tenant may take the GPUs.
// Placement within the cluster is the replay's: findMisfit, the policy's score and chooseNode.
// Both orderings keep a QueueBook for the fair shares they are measured against.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/model/node.h"
#include "troupe/sched/policies/policy.h"
#include "troupe/sim/cluster.h"
#include "troupe/sim/trace.h"
#include "troupe/sim/workload.h"

namespace troupe::sim {

struct TenantSpec {
  std::string name;  // the queue's name: a DNS-1123 label
  double weight = 1;
  int64_t guaranteed_gpus = 0;
};

// "a:1,b:1,c:2:8": name:weight[:guaranteed GPUs], comma-separated. Errors name the entry and
// the fix (the caller adds the flag).
Result<std::vector<TenantSpec>> parseTenants(std::string_view text);

// A pod's tenant: a seeded 64-bit FNV-1a hash of its name, modulo the number of tenants, so
// every tenant gets about the same number of pods whatever its weight.
int tenantOf(const std::string& pod_name, int64_t seed, size_t tenants);

struct TimedPod {
  std::string name;
  sched::GpuRequest request;
  double arrival = 0;   // seconds from the first creation, divided by the load factor
  double duration = 0;  // seconds it runs once placed (at least 1)
  int tenant = 0;       // index into the tenants
};

// The trace's pods and clones, the FGD replay's tuning (workload.h, planRun with `seed`): pods
// drawn at random are copied, times included, until the GPU requests reach `ratio` x
// `capacity_milli`, so that the fleet can be asked for more than it holds. Clone k of pod P is
// named "P-clone-k". `sorted_pods` must be sorted by name; a trace already at the ratio: no clones.
std::vector<TracePod> tunedPods(const std::vector<TracePod>& sorted_pods, int64_t capacity_milli,
                                int64_t seed, double ratio);

// The pods with their times, sorted by arrival (then name). Duration: deletion - scheduled,
// or deletion - creation where scheduled is empty. `load` > 0 divides the times between
// arrivals. Errors when a pod lacks creation_time or deletion_time (naming it and `file`).
Result<std::vector<TimedPod>> timedPods(const std::vector<TracePod>& pods, size_t tenants, double load,
                                        int64_t seed, const std::string& file);

enum class Ordering { kFifo, kFairShare };
const char* orderingName(Ordering ordering);

struct WaitStats {
  int n = 0;  // pods that started
  double mean = 0, p50 = 0, p95 = 0, p99 = 0;
};

struct TenantOutcome {
  TenantSpec spec;
  int pods = 0;
  int started = 0;
  int waiting_at_end = 0;
  double share = 0;       // time-weighted share of allocated GPUs while contended (0..1)
  double fair_share = 0;  // time-weighted fair share while contended, as a share of the whole
  WaitStats waits;        // seconds from arrival to start
};

// One sample of the share over time: the tenants' time-weighted shares within [start, end).
struct ShareSample {
  double start = 0, end = 0;
  std::vector<double> share;  // per tenant, of allocated GPUs
  std::vector<double> fair;   // per tenant, of the fair shares' total
  double allocated = 0;       // allocated GPUs / capacity
};

struct PodOutcome {
  double start = -1;  // -1: never started (waiting at the end, or fits no empty node)
  double end = -1;
  int node = -1;
  bool fits_empty = true;  // fits some node of the empty cluster; pods that do not never queue
};

struct TenantRun {
  Ordering ordering = Ordering::kFifo;
  int64_t seed = 0;
  int64_t capacity_gpus = 0;
  double busy_seconds = 0;       // first arrival to the last start: when there is work to place
  double contended_seconds = 0;  // time with a GPU pod waiting that fits an empty node
  double utilisation = 0;        // allocated / capacity, time-weighted over the busy time
  double contended_utilisation = 0;
  double jain = 0;  // Jain's index over tenants of share / fair share (1 = fair)
  std::vector<TenantOutcome> tenants;
  std::vector<ShareSample> samples;
  std::vector<PodOutcome> pods;  // per TimedPod
  int never_fit = 0;             // pods that fit no node of the empty cluster
  // Pods of kWholeNodeGpus or more GPUs (a whole node: the big training jobs), all tenants:
  // their waits, and how many still wait at the end.
  WaitStats whole_node_waits;
  int whole_node_waiting_at_end = 0;
  double seconds = 0;  // wall time
};

// What a scheduling pass did, for tests and invariants: called after every pass.
struct PassRecord {
  struct Served {
    int pod = 0;
    int tenant = 0;
    std::vector<double> ratio;    // per tenant just before: dominant share / fair share
    std::vector<bool> can_place;  // per tenant just before: a waiting pod that fits a node now
    std::vector<bool> admitted;   // ... and that QueueBook admits on some node it fits
  };
  double time = 0;
  const std::vector<model::NodeState>* nodes = nullptr;
  std::vector<Served> served;  // in order
  std::vector<int> waiting;    // after the pass, in arrival order
};

struct TenantSimInput {
  const Cluster* cluster = nullptr;
  const std::vector<TimedPod>* pods = nullptr;  // sorted by arrival
  std::vector<TenantSpec> tenants;
  sched::PolicyConfig policy;
  Ordering ordering = Ordering::kFifo;
  int64_t seed = 42;  // the random stream of policies that draw
  int samples = 200;  // share samples over the busy time
  std::function<void(const PassRecord&)> on_pass;
};

TenantRun simulateTenants(const TenantSimInput& input);

// Jain's fairness index: (sum x)^2 / (n * sum x^2); 1 when all equal, 1/n when one has all.
// 0 for no values or all zero.
double jainIndex(const std::vector<double>& x);
// Nearest-rank percentile (p in 0..100) of `values`; 0 when empty.
double percentile(std::vector<double> values, double p);
WaitStats waitStats(const std::vector<double>& waits);

}  // namespace troupe::sim
