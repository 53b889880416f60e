// A synthetic but realistic GPU cluster for troupe_bench: v1.Node and v1.Pod objects shaped
// like kube-scheduler's own (see shared/fixtures/kube-scheduler/filter-full-nodes.json), and a
// Scheduler filled to about half its GPUs through the same filter + reserve path a real
// kube-scheduler drives. Everything is deterministic (fixed seeds), so runs compare.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "adapters/http/wire.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::bench {

// The machine kinds in the mix: 70% HGX H100 (NVSwitch), 20% PCIe L40S, 10% HGX A100.
enum class NodeKind { kH100, kL40S, kA100 };
NodeKind kindOf(int index);
const char* kindName(NodeKind kind);

std::string nodeName(int index);

// One full v1.Node as the scheduler's informer holds it (managedFields, images, conditions,
// nodeInfo, ...), compact JSON, ~4.9 KB.
http::Json makeNodeObject(int index);

// A training pod shaped like the fixture's (managedFields, volumes, tolerations, ...) asking
// `gpus` whole GPUs; with `nvlink` it also carries troupe.dev/gpu-topology: nvlink.
http::Json makePodObject(const std::string& name, const std::string& uid, int gpus, bool nvlink);

struct Cluster {
  std::vector<std::string> names;      // candidate order: a fixed shuffle of the indices
  std::vector<std::string> node_json;  // compact v1.Node per node, for full-mode bodies
};
// Names always; node_json only when `with_objects` (it costs ~4.9 KB a node).
Cluster makeCluster(int nodes, bool with_objects);

// Learns every node (decoded from its v1.Node JSON exactly as the full-mode path would) into
// `scheduler`, without keeping the JSON around.
void learnNodes(sched::Scheduler& scheduler, int nodes);

struct FillStats {
  int pods = 0;
  int64_t gpus = 0;
  int64_t gpus_used = 0;
};
// Places background pods (8, 4, 2+2, 2+1+1, 1+1+1+1 GPUs, or nothing per node; ~50% of GPUs
// overall) through Scheduler::filter + Scheduler::reserve, the bind path.
FillStats populate(sched::Scheduler& scheduler, int nodes);

// ExtenderArgs bodies, byte-shaped like kube-scheduler's json.Marshal output.
std::string namesBody(const std::string& pod_json, const std::vector<std::string>& names);
std::string fullBody(const std::string& pod_json, const std::vector<std::string>& node_json);

}  // namespace troupe::bench
