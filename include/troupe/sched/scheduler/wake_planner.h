// Which pending pods to wake after Troupe's answer for them changed without a Kubernetes event
// kube-scheduler reacts to (a Queue's limit raised, a reclaim hold released, a gang's plan
// ended, ...: docs/kubernetes-mode.md#waking-pending-pods). kube-scheduler parks a pod the
// extender refused until some cluster event or its 5-minute flush; the adapter wakes the pods
// chosen here with one write each (an annotation kube-scheduler's queue treats as a pod update).
//
// Pure: the caller says which pods Troupe's latest filter refused and whether each would pass
// now; the planner orders them, charges each against the room the ones before it took (so a
// queue raised by 4 GPUs wakes 4 one-GPU pods, not all 1,000 waiting), wakes a gang whole, caps
// a round, keeps the room of a pod woken but not yet filtered again, and does not wake a pod again before its
// backoff (doubling per wake, so a pod Troupe keeps misjudging costs a write every few minutes at most, not
// one per round).
//
// Not thread-safe: one caller (the Scheduler, under its lock) at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace troupe::sched {

// A pending pod Troupe's latest filter refused on every node it was offered.
struct WakeCandidate {
  std::string uid;
  std::string key;    // namespace/name
  std::string queue;  // "" without queues
  std::string gang;   // gang key, "" for a pod on its own
  int64_t milli = 0;  // the GPUs it asks for, in thousandths
  int64_t priority = 0;
  uint64_t seq = 0;  // its pending record's sequence number: older pods first
};

struct WakeOptions {
  size_t max_per_round = 200;                     // the rest wait for the next round
  std::chrono::milliseconds first_backoff{5000};  // before the same pod is woken again
  // Doubling up to this: a pod Troupe keeps misjudging (kube-scheduler's own plugins refuse it,
  // e.g. a taint) costs about as many writes as kube-scheduler's own 5-minute flush retries it.
  std::chrono::milliseconds max_backoff{240000};
};

class WakePlanner {
 public:
  using Clock = std::chrono::steady_clock;
  // Whether `c` would pass Troupe's filter now if `queue_before` thousandths more were already
  // taken in its queue by the pods chosen before it. For a gang member it answers for the whole
  // gang (asked once per gang and round).
  using Fits = std::function<bool(const WakeCandidate& c, int64_t queue_before)>;

  explicit WakePlanner(WakeOptions options = {}) : options_(options) {}

  // The pods to wake now, in order. `refused`: every pod Troupe's latest filter refused that is
  // still pending; `free_milli`: the GPUs free in the cluster (thousandths), which the chosen
  // pods together may not exceed. A pod that is no longer in `refused` is forgotten.
  std::vector<WakeCandidate> plan(std::vector<WakeCandidate> refused, const Fits& fits, Clock::time_point now,
                                  int64_t free_milli);

  // Pods woken at least once and still remembered (for tests and diagnostics).
  size_t remembered() const { return woken_.size(); }

 private:
  struct Woken {
    Clock::time_point at;
    Clock::duration backoff;
    uint64_t seq;  // the pod's record when woken: a later filter changes it
  };
  const WakeOptions options_;
  std::unordered_map<std::string, Woken> woken_;
};

}  // namespace troupe::sched
