#include "troupe/sim/defrag.h"

#include <algorithm>
#include <array>
#include <optional>

#include "troupe/sched/score/placement.h"

namespace troupe::sim {
namespace {

// F of `node` with `cpu_delta` more CPU used and `milli_delta` more used on each of `gpus`.
double fragmentedWith(const model::NodeState& node, sched::FragmentationCache& measure,
                      const std::vector<int>& gpus, int64_t milli_delta, int64_t cpu_delta) {
  std::array<int64_t, 64> buffer;
  std::span<int64_t> free = sched::freeMilliInto(node, buffer);
  for (int g : gpus) free[static_cast<size_t>(g)] -= milli_delta;
  return measure.get(node.info().gpu_product, sched::cpuLeft(node) - cpu_delta, free);
}

double fragmentedOf(const model::NodeState& node, sched::FragmentationCache& measure) {
  return fragmentedWith(node, measure, {}, 0, 0);
}

struct Candidate {
  size_t node = 0;
  const model::Allocation* pod = nullptr;
  double source_gain = 0;  // F(node) - F(node without the pod)
};

bool movable(const model::Allocation& a) { return a.gang.empty() && a.unknown_gpus == 0; }

}  // namespace

double fragmentedMilli(const std::vector<model::NodeState>& nodes, sched::FragmentationCache& measure) {
  double total = 0;
  for (const model::NodeState& node : nodes) total += fragmentedOf(node, measure);
  return total;
}

DefragPlan planDefrag(std::vector<model::NodeState>& nodes, const DefragInput& in) {
  DefragPlan plan;
  sched::FragmentationCache& measure = *in.measure;
  plan.before_milli = fragmentedMilli(nodes, measure);
  std::vector<double> frag(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) frag[i] = fragmentedOf(nodes[i], measure);
  // Below this a "gain" is float noise, and moving a pod for it would churn.
  constexpr double kMinGainMilli = 1.0;
  for (int step = 0; step < in.max_moves; ++step) {
    std::vector<Candidate> candidates;
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (const auto& [uid, a] : nodes[i].allocations()) {
        if (!movable(a)) continue;
        const double without = fragmentedWith(nodes[i], measure, a.gpus, -a.milli_per_gpu, -a.cpu_milli);
        candidates.push_back({i, &a, frag[i] - without});
      }
    }
    if (in.candidate_pods > 0 && candidates.size() > in.candidate_pods) {
      std::partial_sort(candidates.begin(), candidates.begin() + static_cast<long>(in.candidate_pods),
                        candidates.end(), [](const Candidate& a, const Candidate& b) {
                          if (a.source_gain != b.source_gain) return a.source_gain > b.source_gain;
                          return a.node != b.node ? a.node < b.node : a.pod->pod_uid < b.pod->pod_uid;
                        });
      candidates.resize(in.candidate_pods);
    }
    std::optional<DefragMove> best;
    for (const Candidate& c : candidates) {
      const sched::GpuRequest req = in.request_of(*c.pod);
      for (size_t t = 0; t < nodes.size(); ++t) {
        if (t == c.node || sched::findMisfit(nodes[t], req) != sched::Misfit::kNone) continue;
        sched::NodeScore score = in.policy->score(nodes[t], req, in.policy_context);
        if (static_cast<int>(score.placement.gpus.size()) != (req.wantsGpus() ? req.gpus : 0)) continue;
        const double after =
            fragmentedWith(nodes[t], measure, score.placement.gpus, req.milli_per_gpu, req.cpu_milli);
        const double gain = c.source_gain + frag[t] - after;
        if (gain >= kMinGainMilli && (!best || gain > best->gain_milli)) {
          best = DefragMove{c.pod->pod_uid, c.node, t, std::move(score.placement.gpus), gain};
        }
      }
    }
    if (!best) break;
    model::Allocation moved = *nodes[best->from].find(best->pod_uid);
    moved.node = nodes[best->to].info().name;
    moved.gpus = best->gpus;
    if (!nodes[best->to].add(moved).isOk()) break;  // findMisfit said it fits; never expected
    nodes[best->from].remove(best->pod_uid);
    frag[best->from] = fragmentedOf(nodes[best->from], measure);
    frag[best->to] = fragmentedOf(nodes[best->to], measure);
    plan.moves.push_back(std::move(*best));
  }
  plan.after_milli = fragmentedMilli(nodes, measure);
  return plan;
}

}  // namespace troupe::sim
