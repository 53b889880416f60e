// PodGroup objects a gang takes its minimum from, in one of two APIs:
// - scheduler-plugins' coscheduling (scheduling.x-k8s.io/v1alpha1, a CRD): a gang named by the
//   label scheduling.x-k8s.io/pod-group takes spec.minMember;
// - Kubernetes' own (scheduling.k8s.io v1alpha2 on 1.36, v1beta1 on 1.37, v1 later: whichever
//   discovery finds serving podgroups, native_pod_group.h): a pod with
//   spec.schedulingGroup.podGroupName takes spec.schedulingPolicy.gang.minCount (a `basic`
//   policy: no gang) and spec.schedulingConstraints.topology[0].key.
//
// Watched (watchHandler(), fed by a list-then-watch of the API's podgroups): a watched object
// answers lookup at once and stays current, and a changed minimum is handed to `on_min_changed`
// (the core's Scheduler::setGangMinimum: elastic gangs) as soon as the event arrives. A group the
// watch has not seen (not listed yet, the watch refused by RBAC or not started) is read on demand
// from the filter path (one GET per group, then cached: found groups for `found_ttl`, missing
// ones briefly, so a PodGroup created just after its pods is seen soon).
// The API may be absent: a 404 is told apart by asking discovery for the group version, and
// that answer is cached for `no_crd_ttl`. Every failure becomes a PodGroupInfo whose `absent`
// says why, so the pod's reason names it and troupe.dev/gang-size is used instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "adapters/common/logger.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/podgroups/native_pod_group.h"
#include "adapters/kube/watch/watch_handler.h"
#include "troupe/sched/gang/gang.h"

namespace troupe::kube {

// scheduler-plugins' PodGroups, all namespaces (a watch's path).
inline constexpr const char* kSchedulerPluginsPodGroups = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups";

struct PodGroupOptions {
  std::chrono::milliseconds found_ttl{std::chrono::seconds(10)};
  std::chrono::milliseconds missing_ttl{std::chrono::seconds(2)};
  std::chrono::milliseconds no_crd_ttl{std::chrono::seconds(10)};
  size_t max_entries = 10000;
};

// Which PodGroup API a cache reads.
enum class PodGroupApi {
  kSchedulerPlugins,  // scheduling.x-k8s.io/v1alpha1
  kNative,            // scheduling.k8s.io, the version discovery finds (NativePodGroupApi)
};

class PodGroupCache {
 public:
  using Clock = std::chrono::steady_clock;
  PodGroupCache(KubeTransport& api, adapters::Logger& logger, PodGroupOptions options = {},
                std::function<Clock::time_point()> clock = {},
                PodGroupApi which = PodGroupApi::kSchedulerPlugins, NativePodGroupApi* native = nullptr);
  PodGroupCache(const PodGroupCache&) = delete;
  PodGroupCache& operator=(const PodGroupCache&) = delete;

  // Thread-safe; may block on one API request when the answer is not cached.
  sched::PodGroupInfo lookup(const std::string& ns, const std::string& name);

  // Drops what is cached for PodGroup "namespace/name": its gang ended, and a gang re-created
  // under that name reads the object afresh (it may have been re-created with another size).
  void forget(const std::string& key);

  uint64_t apiReads() const;

  // --- watched -----------------------------------------------------------------------------
  // Called with a PodGroup's "namespace/name" and minimum when a watch event brings a minimum
  // other than the one known (or the first one), after the cache holds it; never under the
  // cache's lock. Set before the watch starts.
  using MinChanged = std::function<void(const std::string& key, int min_member)>;
  void onMinChanged(MinChanged callback) { on_min_changed_ = std::move(callback); }
  // Feed a list-then-watch of this API's podgroups (all namespaces) into it.
  WatchHandler& watchHandler() { return watch_feed_; }
  size_t watchedCount() const;

 private:
  using Feed = MemberFeed<PodGroupCache>;
  void beginWatchList();
  void endWatchList();
  void watchEvent(WatchEventType type, const Json& object);
  // The object's minimum (and, natively, its policy and topology), or `absent` set.
  sched::PodGroupInfo decodeObject(const std::string& what, const Json& object) const;

  struct Entry {
    sched::PodGroupInfo info;
    Clock::time_point expires;
  };
  Clock::time_point now() const { return clock_ ? clock_() : Clock::now(); }
  sched::PodGroupInfo read(const std::string& ns, const std::string& name, std::chrono::milliseconds* ttl);
  bool crdInstalled(std::string* why);
  // The object's minimum (and, natively, its policy and topology), or `absent` set.
  sched::PodGroupInfo decode(const std::string& what, const std::string& body) const;
  // Natively: the served version's path, or "" with `why` set.
  std::string nativePath(std::string* why, std::chrono::milliseconds* ttl);
  std::string notServed() const;

  KubeTransport& api_;
  adapters::Logger& logger_;
  const PodGroupOptions options_;
  std::function<Clock::time_point()> clock_;
  const PodGroupApi which_;
  const std::string group_version_;                  // scheduler-plugins' only
  std::unique_ptr<NativePodGroupApi> owned_native_;  // when none was given
  NativePodGroupApi* native_ = nullptr;

  mutable std::mutex mu_;  // guards everything below
  std::unordered_map<std::string, Entry> entries_;
  std::unordered_map<std::string, sched::PodGroupInfo> watched_;  // as the watch last showed them
  std::unordered_set<std::string> relisted_;                      // during a list: the keys seen
  bool listing_ = false;
  Clock::time_point crd_checked_{};
  bool crd_known_ = false;
  bool crd_installed_ = false;
  uint64_t reads_ = 0;

  MinChanged on_min_changed_;
  Feed watch_feed_{*this, &PodGroupCache::beginWatchList, &PodGroupCache::endWatchList,
                   &PodGroupCache::watchEvent};
};

}  // namespace troupe::kube
