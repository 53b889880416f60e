// The scheduled condition on native PodGroups (PodGroupScheduled on scheduling.k8s.io/v1alpha2,
// PodGroupInitiallyScheduled from v1beta1 on: the version discovery finds) whose gang
// Troupe admitted (True, reason Scheduled, the nodes in the message), timed out at its bind
// barrier, or whose plan no bind reached (False, reason Unschedulable, Troupe's reason). kube-scheduler
// writes the same condition after its own PodGroup cycle; like it, Troupe never turns True into False, so a
// gang that once ran is not reported unschedulable because a later retry of extra pods failed.
//
// The gang notices arrive on the thread that answers binds, which must not wait on the API:
// they are queued here (one per group, newest wins, True over False), and written a moment
// later (`settle`) by the
// runtime's housekeeping thread, only on the active replica (the queue status rule). Each
// write reads the object (404: the group is gone, nothing to write) and patches only that
// condition (a strategic merge patch keyed by type), keeping lastTransitionTime when the
// status does not change.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "adapters/common/logger.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/podgroups/native_pod_group.h"

namespace troupe::kube {

class PodGroupStatusWriter {
 public:
  using WallClock = std::function<std::chrono::system_clock::time_point()>;
  // `settle`: how long a queued condition waits before it is written. kube-scheduler writes its
  // own (generic) condition right after each PodGroup cycle, which is when Troupe's notices
  // come; written a little later, Troupe's reason is the one that stays.
  PodGroupStatusWriter(KubeTransport& api, adapters::Logger& logger, WallClock wall = {},
                       std::chrono::milliseconds settle = std::chrono::seconds(2),
                       NativePodGroupApi* native = nullptr);

  // Queues the condition for PodGroup "namespace/name". Thread-safe; never calls the API.
  void enqueue(const std::string& key, bool scheduled, const std::string& message);
  // Writes what is queued; returns how many conditions were patched. A failed write that may
  // succeed later stays queued (bounded).
  size_t flush();
  // An inactive replica drops what it queued: the active one writes its own.
  void drop();
  size_t queued() const;

 private:
  struct Pending {
    bool scheduled = false;
    std::string message;
    int attempts = 0;
    std::chrono::steady_clock::time_point due{};
  };
  // true: done (written, or nothing to write); false: try again later.
  bool write(const std::string& key, const Pending& p);

  KubeTransport& api_;
  adapters::Logger& logger_;
  WallClock wall_;
  const std::chrono::milliseconds settle_;
  std::unique_ptr<NativePodGroupApi> owned_native_;  // when none was given
  NativePodGroupApi* native_ = nullptr;
  mutable std::mutex mu_;
  std::map<std::string, Pending> pending_;
};

}  // namespace troupe::kube
