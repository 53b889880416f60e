// Kubernetes objects as Troupe reads them from the API: JSON parsing that drops what
// scheduling never reads (so a 500-pod list page stays a few MB), and the pod facts that GPU
// accounting needs.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "adapters/common/kube_json.h"
#include "troupe/common/status.h"
#include "troupe/model/node.h"
#include "troupe/model/topology_levels.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::kube {

using Json = adapters::Json;

// Parses one JSON document (an object, a list page, a watch event). Bulky members Troupe
// never reads (managedFields, volumes, env, probes, status conditions, node images, ...) are
// skipped while parsing; labels and annotations are always kept whole.
Result<Json> parseKubeJson(std::string_view text);

// metadata.resourceVersion, "" when absent.
std::string resourceVersionOf(const Json& object);
// metadata.uid and metadata.name, "" when absent (a watch's DELETED event needs no more).
std::string uidOf(const Json& object);
std::string nameOf(const Json& object);

// A pod as GPU accounting sees it.
struct PodView {
  sched::PodFacts facts;
  std::string scheduler_name;  // spec.schedulerName ("default-scheduler" when absent)
  bool terminating = false;    // metadata.deletionTimestamp is set (it still holds its GPUs)
  bool finished = false;       // phase Succeeded or Failed: holds nothing any more
  int gpus = 0;                // GPUs it holds once bound (1 for a shared pod); 0 = not a GPU pod
  int64_t milli_per_gpu = 1000;
  // The CPU (millicores) and memory (bytes) it requests, which it holds on its node once
  // bound; 0 when unreadable (kube-scheduler would not have bound it either).
  int64_t cpu_milli = 0;
  int64_t memory_bytes = 0;
  bool has_assignment = false;     // troupe.dev/gpus is present
  std::vector<int> assigned;       // its indices when usable
  std::string assignment_problem;  // why they are not usable ("" when usable or absent)
  // metadata.creationTimestamp and status.startTime (wall clock), when present and readable:
  // how long a pod has waited or run, for its queue (the minimum runtime before reclaim).
  std::optional<std::chrono::system_clock::time_point> created;
  std::optional<std::chrono::system_clock::time_point> started;
  // Its GPU request, parsed once per watch event against `request_levels` (the topology
  // levels): nullopt when it does not parse. The sync and the core take it from here.
  std::optional<sched::GpuRequest> request;
  std::vector<std::string> request_levels;

  bool bound() const { return !facts.node_name.empty(); }
  bool holdsGpus() const { return bound() && !finished && gpus > 0; }
  // Bound and running with GPUs, CPU or memory the node's model should count.
  bool holdsResources() const {
    return bound() && !finished && (gpus > 0 || cpu_milli > 0 || memory_bytes > 0);
  }
};

// Decodes a v1.Pod. A pod whose GPU annotations are invalid still counts by its
// nvidia.com/gpu request: it may be running, bound by someone else.
// `topology_levels`: those the topology annotations may name (the scheduler's).
Result<PodView> decodePod(const Json& pod,
                          const std::vector<std::string>& topology_levels = model::defaultTopologyLevels());

// A v1.Node as the core sees it: adapters::nodeFromJson's GPU facts plus the allocatable CPU,
// memory and pod count, so the placements Troupe makes (and scores by free CPU, as the
// simulator does) account for the CPU and memory of every pod bound there (ClusterSync).
Result<model::NodeFacts> decodeNode(const Json& node);

// An API timestamp ("2026-12-02T05:49:32Z", fractions and offsets accepted); nullopt when it is
// not one.
std::optional<std::chrono::system_clock::time_point> parseApiTime(std::string_view text);
// The form the API writes: "2026-12-02T05:49:32Z" (UTC, whole seconds).
std::string formatApiTime(std::chrono::system_clock::time_point t);

// "0,1,2,3"
std::string formatGpus(const std::vector<int>& gpus);

// "ns/name" -> {ns, name}; a key without a slash is a name with no namespace.
std::pair<std::string, std::string> splitObjectKey(const std::string& key);

// One entry of an object's status.conditions (metav1.Condition).
struct ApiCondition {
  std::string type;
  std::string status;  // "True" | "False"
  std::string reason;
  std::string message;
  std::string last_transition;  // RFC 3339
};

// The object's status.conditions (a Queue's, a PodGroup's); none when absent or unreadable.
std::vector<ApiCondition> conditionsOf(const Json& object);

}  // namespace troupe::kube
