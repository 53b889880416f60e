// Performs the core's reclaim rounds (Scheduler::planReclaim) through the Eviction API, so
// PodDisruptionBudgets are honoured:
//   1. every victim is evicted as a dry run (deleteOptions.dryRun: [All]) first;
//   2. only when every dry run succeeds are the real evictions sent: a budget that refuses one
//      member of a gang (429) leaves the whole gang, and every other victim, running;
//   Both steps send up to max_in_flight calls at once: a round of hundreds of victims takes
//   a few API round trips, not one per victim, and the API server sees a bounded burst.
//   3. Events: Reclaimed on each evicted pod and ReclaimStarted on each waiting pod (or gang's
//      pending members) the evictions made room for, or ReclaimBlocked with why on them;
//   4. Scheduler::reclaimFinished(plan, evicted, why).
// A victim already gone (404, or another pod under its name: the uid precondition fails) counts
// as evicted. Each eviction carries the victim's uid as precondition.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/kube/bind/events.h"
#include "adapters/kube/client/api_client.h"
#include "troupe/sched/queue/reclaim.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::kube {

// The policy/v1 Eviction body for a pod; `dry_run` adds deleteOptions.dryRun: ["All"].
std::string evictionJson(const std::string& ns, const std::string& name, const std::string& uid,
                         bool dry_run);

// The core's side of reclaiming: Scheduler::planReclaim and reclaimFinished, or a test's.
struct ReclaimCore {
  std::function<std::optional<sched::ReclaimPlan>()> plan;
  std::function<void(const sched::ReclaimPlan&, bool evicted, const std::string& why)> finished;
  static ReclaimCore of(sched::Scheduler& scheduler);
};

class Reclaimer {
 public:
  // The pending pods a plan is for: its for_key (namespace/name or a gang key) -> pods.
  using WaitingPods = std::function<std::vector<PodRef>(const std::string& for_key)>;
  // `events` may be null (no Events). `max_in_flight`: Eviction calls sent at once (>= 1).
  Reclaimer(KubeTransport& api, ReclaimCore core, EventRecorder* events, adapters::Logger& logger,
            WaitingPods waiting, size_t max_in_flight = kDefaultInFlight);
  static constexpr size_t kDefaultInFlight = 16;

  enum class Outcome { kNothing, kEvicted, kBlocked };
  // One round: the next plan, if any, performed.
  Outcome runOnce();

  struct Stats {
    uint64_t plans = 0, evicted_pods = 0, blocked = 0;
  };
  Stats stats() const { return stats_; }

 private:
  // OK, or why the eviction was refused; `gone` is set when the pod no longer exists.
  Status evict(const sched::ReclaimVictim& victim, bool dry_run, bool* gone);
  // evict() for every victim, up to max_in_flight_ at once; results in the victims' order.
  struct Result {
    Status status = Status::ok();
    bool gone = false;
  };
  std::vector<Result> evictAll(const std::vector<sched::ReclaimVictim>& victims, bool dry_run);
  void tellWaiting(const sched::ReclaimPlan& plan, const std::string& type, const std::string& reason,
                   const std::string& message);

  KubeTransport& api_;
  ReclaimCore core_;
  EventRecorder* events_;
  adapters::Logger& logger_;
  WaitingPods waiting_;
  size_t max_in_flight_;
  Stats stats_;
};

}  // namespace troupe::kube
