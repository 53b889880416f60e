// Kubernetes' own PodGroups (the Workload API, scheduling.k8s.io) across the versions a server
// may serve: v1alpha2 (1.36), v1beta1 (1.37, where v1alpha2 was removed) and v1 (when it comes).
//
// - NativePodGroupApi finds which version serves `podgroups` by API discovery (v1, else v1beta1,
//   else v1alpha2): each version's resource list must name podgroups, because
//   scheduling.k8s.io/v1 is served everywhere for PriorityClasses. The answer is cached for
//   `ttl`; a version that stops being served (an upgrade) is noticed when it expires.
// - decodeNativePodGroup reads both shapes of a PodGroup into one struct:
//     v1alpha2: spec.podGroupTemplateRef.workload{workloadName, podGroupTemplateName},
//               spec.disruptionMode "Pod" | "PodGroup";
//     v1beta1+: spec.workloadRef{workloadName, templateName}, spec.parentCompositePodGroupName,
//               spec.disruptionMode {single: {}} | {all: {}} (default single),
//               spec.preemptionPolicy.
//   Both: spec.schedulingPolicy.{gang.minCount | basic}, spec.schedulingConstraints.topology[0].key,
//   spec.priorityClassName, spec.priority.
// - The condition kube-scheduler (and Troupe) write on a scheduled group is PodGroupScheduled on
//   v1alpha2 and PodGroupInitiallyScheduled from v1beta1 on.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "adapters/common/kube_json.h"
#include "adapters/kube/client/api_client.h"

namespace troupe::kube {

inline constexpr const char* kNativePodGroupsGroup = "/apis/scheduling.k8s.io";
// Newest first: the order discovery tries them in.
inline constexpr const char* kNativePodGroupVersions[] = {"v1", "v1beta1", "v1alpha2"};

// The condition type of a scheduled PodGroup in `version` (e.g. "v1beta1").
std::string nativeScheduledCondition(const std::string& version);

struct NativePodGroup {
  std::optional<int> min_count;  // spec.schedulingPolicy.gang.minCount, 1..100000
  bool basic = false;            // spec.schedulingPolicy.basic: not a gang
  std::string topology_key;      // spec.schedulingConstraints.topology[0].key
  std::string workload_name;     // workloadRef.workloadName / podGroupTemplateRef.workload.workloadName
  std::string template_name;     // workloadRef.templateName / ...workload.podGroupTemplateName
  std::string parent_composite;  // spec.parentCompositePodGroupName (v1beta1+)
  bool disruption_all = false;   // disruptionMode {all: {}} or "PodGroup": disrupted whole
  std::string priority_class_name;
  std::optional<int32_t> priority;
  std::string preemption_policy;  // "" when unset
  std::string error;              // why the policy is unusable ("" when min_count or basic)
};

// `what` names the object in `error` (e.g. "PodGroup ml/train").
NativePodGroup decodeNativePodGroup(const adapters::Json& object, const std::string& what);

class NativePodGroupApi {
 public:
  using Clock = std::chrono::steady_clock;
  explicit NativePodGroupApi(KubeTransport& api, std::chrono::milliseconds ttl = std::chrono::seconds(10),
                             std::function<Clock::time_point()> clock = {});
  NativePodGroupApi(const NativePodGroupApi&) = delete;
  NativePodGroupApi& operator=(const NativePodGroupApi&) = delete;

  struct Served {
    std::string version;   // "" when none is served (or discovery failed: `unknown`)
    bool unknown = false;  // discovery failed (not a 404): ask again next time
    std::string error;     // the failure, when unknown
    std::string path() const { return std::string(kNativePodGroupsGroup) + "/" + version; }
  };
  // Thread-safe; may block on up to three discovery requests when the answer is not cached.
  Served served();
  // What to tell a user when no version is served.
  static std::string notServedReason();
  uint64_t discoveryReads() const;

 private:
  Clock::time_point now() const { return clock_ ? clock_() : Clock::now(); }

  KubeTransport& api_;
  const std::chrono::milliseconds ttl_;
  std::function<Clock::time_point()> clock_;
  mutable std::mutex mu_;
  std::optional<Served> known_;
  Clock::time_point checked_{};
  uint64_t reads_ = 0;
};

}  // namespace troupe::kube
