// Gang membership: which pods must start together, and how many of them at least.
//
// Troupe reads its own keys and the ones users already write for other schedulers, in this
// order (the first one present wins; the minimum may come from a later key):
//   0. troupe.dev/gang: NAME, troupe.dev/gang-size: N     (annotation or label): first, because
//      with WorkloadWithJob the Job controller names a (`basic`) PodGroup in every Job's pods
//   1. spec.schedulingGroup.podGroupName: NAME (Kubernetes' own PodGroup, scheduling.k8s.io/
//      v1alpha2 or v1beta1): its spec.schedulingPolicy.gang.minCount is the minimum; a `basic`
//      policy means no gang; without the object, troupe.dev/gang-size, else an error naming both
//   2. scheduling.x-k8s.io/pod-group: NAME (label; scheduler-plugins coscheduling)
//   3. scheduling.k8s.io/group-name: NAME (annotation; Volcano)
//   4. kueue.x-k8s.io/pod-group-name: NAME + kueue.x-k8s.io/pod-group-total-count: N (Kueue)
// The minimum: for a gang named by the scheduler-plugins label, the minMember of its PodGroup
// object when an adapter could read it (the object is the scheduler-plugins source of truth);
// otherwise troupe.dev/gang-size, else Kueue's total count (for a Kueue gang), else the
// PodGroup's minMember; else it is an error that says which key to add. troupe.dev/gang-timeout (e.g. "5m",
// "90s") bounds the wait at the bind barrier; default from config. Names are scoped to the pod's namespace.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/model/pod_contract.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

// Not a label: the pod's spec field that names its native PodGroup (GangSpec::source).
inline constexpr const char* kSchedulingGroup = "spec.schedulingGroup.podGroupName";

struct GangSpec {
  std::string key;  // namespace/name
  int min_member = 1;
  std::chrono::milliseconds timeout{0};
  bool timeout_capped = false;  // the pod asked for more than the configured maximum
  std::string source;           // which key named the gang, for messages
  // A native PodGroup's spec.schedulingConstraints.topology[0].key: the gang must sit inside
  // one domain of that label (resolved against topology.levels by gangTopologyLevel).
  std::string topology_key;
  // A native PodGroup's spec.priority (v1beta1+): the gang's place in Troupe's line, instead of
  // its members' highest pod priority.
  std::optional<int64_t> priority;

  bool native() const { return source == kSchedulingGroup; }
};

// What an adapter found about the PodGroup object a pod names: scheduler-plugins' (scheduling.
// x-k8s.io/v1alpha1, by the scheduling.x-k8s.io/pod-group label) or Kubernetes' own
// (scheduling.k8s.io/v1alpha2, by spec.schedulingGroup.podGroupName).
struct PodGroupInfo {
  PodGroupInfo() = default;
  PodGroupInfo(std::optional<int> min, std::string why) : min_member(min), absent(std::move(why)) {}

  // spec.minMember, or spec.schedulingPolicy.gang.minCount, when the object could be read
  std::optional<int> min_member;
  std::string absent;               // why not, for messages (e.g. "the PodGroup CRD is not installed")
  bool basic = false;               // native, spec.schedulingPolicy.basic: the pods are not a gang
  std::string topology_key;         // native, spec.schedulingConstraints.topology[0].key; "" when none
  std::optional<int32_t> priority;  // native, spec.priority (v1beta1+), when set
  // native, spec.parentCompositePodGroupName (v1beta1+): a child of a CompositePodGroup (a
  // multi-level gang, scheduling.k8s.io/v1alpha3), which Troupe refuses rather than split
  std::string composite_parent;
};

// Reads the PodGroup object a pod names (an adapter's cache of the Kubernetes API; it may
// block on a request). One for each API: scheduler-plugins' and the native one.
using PodGroupLookup = std::function<PodGroupInfo(const std::string& ns, const std::string& name)>;

// What is known of a pod's PodGroup where no adapter reads PodGroups (no Kubernetes API).
PodGroupInfo podGroupsUnread();

// What an adapter hands filter about the pod's PodGroup: {} when no PodGroup names its gang,
// podGroupsUnread() without a lookup, else what the lookup read (`native` for a pod with
// spec.schedulingGroup, `lookup` for the scheduler-plugins label). Adapters call it before
// the core, so that the core never waits on the API.
PodGroupInfo podGroupFor(const PodFacts& pod, const PodGroupLookup& lookup,
                         const PodGroupLookup& native = {});

// A native gang's topology constraint as a level of `levels`: -1 without one; an error naming
// the key and topology.levels when the key is not a configured level.
Result<int> gangTopologyLevel(const GangSpec& spec, const std::vector<std::string>& levels);

// nullopt when the pod belongs to no gang.
Result<std::optional<GangSpec>> parseGang(const PodFacts& pod, std::chrono::milliseconds default_timeout,
                                          const PodGroupInfo& pod_group = {});

// The namespace/name of the pod's gang by the same keys as parseGang, without its size:
// for pods already bound, whose size no longer matters. Empty when it is in no gang.
std::string gangKeyOf(const PodFacts& pod);

// The PodGroup name of the scheduler-plugins label, or nullptr: the pod needs a PodGroup lookup.
// A pod with spec.schedulingGroup is in its native PodGroup instead: nullptr.
const std::string* podGroupName(const PodFacts& pod);

// The longest duration parseDuration takes: 100 years. Anything longer is refused rather than
// overflowing a deadline (now() + duration in nanoseconds) later.
inline constexpr std::chrono::milliseconds kMaxDuration{int64_t{100} * 365 * 24 * 3600 * 1000};

// "5m", "90s", "1h30m", "250ms", "1.5h" -> milliseconds (fractions truncated to whole ms); an
// error names the text and the expected form. Never throws; at most kMaxDuration.
Result<std::chrono::milliseconds> parseDuration(const std::string& text);

}  // namespace troupe::sched
