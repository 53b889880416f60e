// Gang membership: which pods must start together, and how many of them at least.
//
// Troupe reads its own keys and the ones users already write for other schedulers, in this
// order (the first one present wins; the minimum may come from a later key):
//   1. troupe.dev/gang: NAME, troupe.dev/gang-size: N     (annotation or label)
//   2. scheduling.x-k8s.io/pod-group: NAME (label; scheduler-plugins coscheduling)
//   3. scheduling.k8s.io/group-name: NAME (annotation; Volcano)
//   4. kueue.x-k8s.io/pod-group-name: NAME + kueue.x-k8s.io/pod-group-total-count: N (Kueue)
// The minimum is troupe.dev/gang-size when present, else Kueue's total count, else the
// PodGroup's minMember that an adapter looked up (pod_group_min), else it is an error that
// says which key to add. troupe.dev/gang-timeout (e.g. "5m", "90s") bounds the wait at the
// bind barrier; default from config. Names are scoped to the pod's namespace.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "troupe/common/status.h"
#include "troupe/sched/pod_request.h"

namespace troupe::sched {

inline constexpr const char* kGangName = "troupe.dev/gang";
inline constexpr const char* kGangSize = "troupe.dev/gang-size";
inline constexpr const char* kGangTimeout = "troupe.dev/gang-timeout";
inline constexpr const char* kPodGroupLabel = "scheduling.x-k8s.io/pod-group";
inline constexpr const char* kVolcanoGroup = "scheduling.k8s.io/group-name";
inline constexpr const char* kKueueGroup = "kueue.x-k8s.io/pod-group-name";
inline constexpr const char* kKueueTotal = "kueue.x-k8s.io/pod-group-total-count";

struct GangSpec {
  std::string key;  // namespace/name
  int min_member = 1;
  std::chrono::milliseconds timeout{0};
  std::string source;  // which key named the gang, for messages
};

// nullopt when the pod belongs to no gang. `pod_group_min` is the minMember of a PodGroup
// object named by the pod, when the adapter could read it.
Result<std::optional<GangSpec>> parseGang(const PodFacts& pod, std::chrono::milliseconds default_timeout,
                                          std::optional<int> pod_group_min = std::nullopt);

// "5m", "90s", "1h30m", "250ms" -> milliseconds; an error names the expected form.
Result<std::chrono::milliseconds> parseDuration(const std::string& text);

}  // namespace troupe::sched
