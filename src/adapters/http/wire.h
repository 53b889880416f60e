// The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1), decoded into
// the core's types and encoded back, byte-compatible with what kube-scheduler expects:
// Go field names, every field present (null when empty), integer scores, and input keys
// matched case-insensitively as Go's decoder does. See docs/extender-protocol.md.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/common/kube_json.h"
#include "adapters/http/extender_scores.h"
#include "troupe/common/status.h"
#include "troupe/model/node.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sched/scheduler/pod_binder.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::http {

// The wire's JSON is the Kubernetes objects' JSON (adapters/common/kube_json.h): Go's field
// order on output, received order kept.
using Json = adapters::Json;
using OrderedJson = Json;

// ExtenderArgs: the filter and prioritize request.
struct ExtenderArgs {
  sched::PodFacts pod;
  bool node_cache_mode = true;          // NodeNames given (true) or a full NodeList
  std::vector<std::string> node_names;  // in both modes: the candidates, in order
  std::vector<model::NodeFacts> nodes;  // full mode only
  // Full mode only: each node object's bytes exactly as received, handed back unchanged for
  // the survivors (kube-scheduler decodes them again), so they are never parsed into a DOM.
  std::vector<std::string> node_objects;
};
Result<ExtenderArgs> decodeExtenderArgs(std::string_view body);

// ExtenderFilterResult. In cache mode the survivors go in NodeNames; in full mode the
// received node objects of the survivors go in Nodes.
std::string encodeFilterResult(const ExtenderArgs& args, const sched::FilterResult& result);
std::string encodeFilterError(const std::string& message);

// HostPriorityList: a bare array.
std::string encodeHostPriorityList(const std::vector<HostScore>& scores);

// ExtenderBindingArgs, as the core's bind request.
Result<sched::BindRequest> decodeBindingArgs(std::string_view body);
std::string encodeBindingResult(const std::string& error);

struct PreemptionArgs {
  sched::PodFacts pod;
  bool meta = true;  // victims came as UIDs (cache mode) or as full pods
  std::map<std::string, std::vector<std::string>> victims;  // node -> victim UIDs, in order
  std::map<std::string, int64_t> pdb_violations;            // node -> NumPDBViolations
};
Result<PreemptionArgs> decodePreemptionArgs(std::string_view body);
// Always NodeNameToMetaVictims (UIDs), in both modes, as kube-scheduler requires.
std::string encodePreemptionResult(const std::map<std::string, std::vector<std::string>>& victims,
                                   const std::map<std::string, int64_t>& pdb_violations);

// The JSON error body of a 4xx answer: {"error": "..."}.
std::string encodeHttpError(const std::string& message);

}  // namespace troupe::http
