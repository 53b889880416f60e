// Live defragmentation advice in Kubernetes mode (docs/defrag.md): on the active replica, every
// defrag.interval, for each pending pod that fits nowhere and is a gang member or asks at least
// defrag.minGpus GPUs, pending at least defrag.minPending, the core's plan
// (Scheduler::adviseDefrag) is
//   - told on the pending pod (a gang: its first pending member by name) as one DefragAdvice
//     Event, not repeated while the advice is unchanged;
//   - counted in the troupe_defrag_advice_* gauges;
//   - and only with defrag.evict on, carried out as the reclaimer does: every pod of the plan
//     evicted as a dry run first, the real evictions only when all pass (a PodDisruptionBudget
//     that refuses one leaves all in place, DefragBlocked on the pending pod), Defragmented on
//     each evicted pod. At most one plan is carried out per round, and not again for the same
//     pending pod within kEvictCooldown. Troupe does not recreate pods: their controllers do,
//     and the plan's target nodes are a hint.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "adapters/common/defrag_options.h"
#include "adapters/common/kube_metrics.h"
#include "adapters/common/logger.h"
#include "adapters/kube/bind/events.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/watch/cluster_sync.h"
#include "troupe/sched/defrag/defrag_advice.h"

namespace troupe::kube {

using DefragOptions = adapters::DefragOptions;  // the config file's defrag section

// What the advisor reads: the unbound GPU pods (ClusterSync::pendingPods) and the core's planner.
struct DefragCore {
  std::function<std::vector<std::pair<std::string, ClusterSync::PendingPod>>()> pending;
  std::function<sched::DefragAdvice(const sched::DefragAsk&, std::set<std::string> pinned, int max_moves)>
      advise;
};

class DefragAdvisor {
 public:
  // `events` and `metrics` may be null.
  DefragAdvisor(KubeTransport& api, DefragCore core, EventRecorder* events, adapters::Logger& logger,
                DefragOptions options, adapters::KubeMetrics* metrics);

  struct Round {
    int asks = 0;   // pending pods (gangs) planned for
    int plans = 0;  // of which had a plan
    int gpus = 0, moves = 0;
    int events = 0;   // DefragAdvice events posted
    int evicted = 0;  // pods evicted
  };
  Round runOnce(std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  static constexpr std::chrono::minutes kEvictCooldown{2};

 private:
  struct Ask {
    sched::DefragAsk ask;
    std::vector<PodRef> pods;  // by name
    std::chrono::system_clock::time_point since;
  };
  std::vector<Ask> asksOf(const std::vector<std::pair<std::string, ClusterSync::PendingPod>>& pending,
                          std::chrono::system_clock::time_point now) const;
  // Dry runs first, then the evictions; the number evicted (0 when blocked).
  int evict(const Ask& ask, const sched::DefragAdvice& advice);

  KubeTransport& api_;
  DefragCore core_;
  EventRecorder* events_;
  adapters::Logger& logger_;
  const DefragOptions options_;
  adapters::KubeMetrics* metrics_;
  std::map<std::string, std::string> told_;  // ask key -> the advice last told
  std::map<std::string, std::chrono::system_clock::time_point> evicted_for_;  // ask key -> when
};

}  // namespace troupe::kube
