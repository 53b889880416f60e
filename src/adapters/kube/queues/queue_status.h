// The Queue objects' status, written by Troupe: what each queue holds, asks for and is due
// (Scheduler::queueStatuses), with three conditions:
//   Valid            False with the error when the queue is not used (its pods are refused);
//   BelowGuaranteed  True while it holds less than it is guaranteed and has pods pending;
//   AboveFairShare   True while it holds more than its fair share.
// A condition's lastTransitionTime changes only when its status does (the first write after a
// start keeps the times the object already shows).
//
// GPU amounts are GPUs as the CRD's int-or-string: an integer when whole, else a string ("2.5").
// Written every few seconds as a merge PATCH of the status subresource, only for queues whose
// status changed since the last write.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "adapters/common/kube_json.h"
#include "adapters/common/logger.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/watch/kube_objects.h"
#include "troupe/sched/queue/queue_book.h"

namespace troupe::kube {

using QueueCondition = ApiCondition;

// The three conditions of `status`, keeping each previous lastTransitionTime while its status
// stays the same; `now` is the time of a transition.
std::vector<QueueCondition> queueConditions(const sched::QueueStatus& status,
                                            const std::vector<QueueCondition>& previous,
                                            const std::string& now);

// The merge-patch body: {"status": {...}}.
adapters::Json queueStatusPatch(const sched::QueueStatus& status,
                                const std::vector<QueueCondition>& conditions);

class QueueStatusWriter {
 public:
  using WallClock = std::function<std::chrono::system_clock::time_point()>;
  using Statuses = std::function<std::vector<sched::QueueStatus>()>;  // Scheduler::queueStatuses
  // `objects`: the names of the Queue objects now; only those get a status.
  QueueStatusWriter(KubeTransport& api, Statuses statuses, adapters::Logger& logger,
                    std::function<std::set<std::string>()> objects, WallClock wall = {});

  // One round: PATCHes every Queue object whose status differs from what was last written.
  // Returns how many were written.
  size_t writeOnce();
  // Forgets what was written (this replica stopped being the active one: the next active one
  // may write something else meanwhile).
  void reset();

 private:
  // The conditions the object shows now (one GET, parsed whole: the watch drops conditions).
  std::vector<QueueCondition> readConditions(const std::string& name);

  KubeTransport& api_;
  Statuses statuses_;
  adapters::Logger& logger_;
  std::function<std::set<std::string>()> objects_;
  WallClock wall_;
  std::map<std::string, std::string> written_;  // name -> the body last written
  std::map<std::string, std::vector<QueueCondition>> conditions_;
};

}  // namespace troupe::kube
