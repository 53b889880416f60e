// The reclaim in flight (reclaim.h): at most one round at a time. While it is, the GPUs its
// victims free are meant for the waiting queue, so the victims' nodes refuse pods of other
// queues. It ends when every victim is gone and every pending pod it was planned for is bound
// (or gone), when its deadline passes, or when the adapter gives it up: the hold covers the
// time between an eviction and the waiting pod's bind, when another queue could take the GPUs.
//
// Thread-safe: its own lock, never held while calling out, so the Scheduler may ask it under
// its model lock.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "troupe/sched/queue/reclaim.h"

namespace troupe::sched {

class ReclaimBook {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Holds `plan` until `deadline`; false (and nothing changes) while another is in flight at
  // `now`, or when the plan has no victims.
  bool start(const ReclaimPlan& plan, TimePoint now, TimePoint deadline);
  // Whether a plan is in flight at `now`; one past its deadline ends here.
  bool inFlight(TimePoint now);
  // The plan in flight (ended ones are not), as started.
  std::optional<ReclaimPlan> current(TimePoint now);
  // A pod is gone (deleted, or its GPUs released): a victim, or a pending pod the plan was
  // for, leaves the plan; the plan ends with the last of them. Any other uid changes nothing.
  void podGone(const std::string& uid);
  // A pending pod the plan was for is bound: as podGone for it.
  void podBound(const std::string& uid);
  // What `queue` holds now: once the round's queue holds what it held plus what the round was
  // for, its pods are all settled, whichever of its pods took the room (kube-scheduler may bind
  // another pending pod of the queue than the one the round placed).
  void queueHolds(const std::string& queue, int64_t milli);
  // The pending pods the plan in flight still waits to see bound.
  std::set<std::string> waitingPods() const;
  // Ends the plan in flight if it is `plan` (same queue, pod and victims); false otherwise.
  bool finish(const ReclaimPlan& plan);
  // The victims of a plan that could not be carried out are not planned again until `until`,
  // so the next plan picks other pods rather than the one a PodDisruptionBudget protects.
  void spare(const ReclaimPlan& plan, TimePoint until);
  // The pods spared at `now` (expired ones are forgotten).
  std::set<std::string> spared(TimePoint now);
  // Whether a plan holds nodes at `now`: filter's one check per call while none does.
  bool holding(TimePoint now) const;
  // nullopt: a pod of `queue` may take GPUs on `node` at `now`; else why not, for filter.
  std::optional<std::string> refusal(const std::string& queue, const std::string& node, TimePoint now) const;

 private:
  bool activeLocked(TimePoint now) const { return plan_ && now < deadline_; }
  void settledLocked(const std::string& uid);

  mutable std::mutex mu_;
  std::optional<ReclaimPlan> plan_;
  TimePoint deadline_{};
  std::set<std::string> waiting_for_;        // victims' uids not yet gone
  std::set<std::string> unbound_;            // served pods' uids not yet bound
  std::set<std::string> nodes_;              // the victims' nodes
  std::map<std::string, TimePoint> spared_;  // uid -> until when it is not planned again
};

}  // namespace troupe::sched
