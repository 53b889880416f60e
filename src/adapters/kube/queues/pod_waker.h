// Wakes pending pods kube-scheduler parked after Troupe's filter refused them, once Troupe's
// answer changed without a Kubernetes event kube-scheduler reacts to (a Queue's limit raised, a
// reclaim hold or a gang's plan released, ...; the list and the mechanism:
// docs/kubernetes-mode.md#waking-pending-pods). The core chooses the pods (Scheduler::planWakes,
// only those that would pass the filter now); this writes, for each, the annotation
// troupe.dev/wake through the pods/status subresource: an update of an unscheduled pod, which
// kube-scheduler's queue moves out of its unschedulable pods at once for a pod the extender
// refused (its rejector "Extender" registers every event, without a queueing hint).
//
// Bounded: a round every `every`, at most WakeOptions::max_per_round pods, `rate_per_second`
// writes overall (a token bucket of `burst`), `max_in_flight` writes at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "adapters/common/internal_errors.h"
#include "adapters/common/logger.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/runtime/stop_signal.h"
#include "troupe/model/pod_contract.h"
#include "troupe/sched/scheduler/wake_planner.h"

namespace troupe::kube {

struct PodWakeOptions {
  bool enabled = true;
  std::chrono::milliseconds every{1000};
  double rate_per_second = 50.0;
  int burst = 50;
  int max_in_flight = 4;
  sched::WakeOptions plan;
  adapters::InternalErrors internal_errors;
};

// The merge patch that wakes a pod: its uid (a pod replaced under the same name refuses it)
// and troupe.dev/wake set to `stamp`.
std::string wakePatch(const std::string& uid, const std::string& stamp);

class PodWaker {
 public:
  using Clock = std::chrono::steady_clock;
  // `plan` returns the pods to wake now (Scheduler::planWakes with this waker's planner);
  // `pending` says whether the pod watch still shows the uid unbound (nothing is written for
  // a pod the core has not heard is gone yet).
  using Plan = std::function<std::vector<sched::WakeCandidate>(sched::WakePlanner&)>;
  using StillPending = std::function<bool(const std::string& uid)>;
  PodWaker(KubeTransport& api, Plan plan, StillPending pending, adapters::Logger& logger,
           PodWakeOptions options, std::function<Clock::time_point()> clock = {});

  // Rounds until `stop` fires.
  void run(StopSignal& stop);
  // One round: plans, then writes. Returns how many pods it woke.
  size_t round(StopSignal& stop);

  uint64_t writes() const;  // PATCHes sent, whatever their answer
  uint64_t woken() const;   // PATCHes the API server accepted

 private:
  Clock::time_point now() const { return clock_ ? clock_() : Clock::now(); }
  // Waits for a token of the bucket; false when stopped.
  bool takeToken(StopSignal& stop);
  bool wake(const sched::WakeCandidate& pod, const std::string& stamp);

  KubeTransport& api_;
  Plan plan_;
  StillPending pending_;
  adapters::Logger& logger_;
  const PodWakeOptions options_;
  std::function<Clock::time_point()> clock_;
  sched::WakePlanner planner_;  // the run thread's only
  uint64_t stamp_ = 0;

  mutable std::mutex mu_;
  double tokens_;
  Clock::time_point refilled_{};
  uint64_t writes_ = 0, woken_ = 0;
  bool warned_forbidden_ = false;
};

}  // namespace troupe::kube
