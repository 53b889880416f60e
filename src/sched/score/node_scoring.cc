#include "troupe/sched/score/node_scoring.h"

#include <algorithm>
#include <array>
#include <bit>

#include "troupe/model/gpu_selection.h"
#include "troupe/sched/score/baseline_scores.h"

namespace troupe::sched {
namespace {

using model::kMilliPerGpu;
using model::NodeState;

// F of the node with `cpu` and `free` left: from the run's memo when there is one, else computed
// with `access` (mixAccess for the node's product).
double fragOf(const ScoreContext& ctx, const RequestMix& mix, const std::string& product,
              std::span<const uint64_t> access, int64_t cpu, std::span<const int64_t> free) {
  return ctx.cache ? ctx.cache->get(product, cpu, free) : fragmentation(mix, access, cpu, free);
}

// FGD's evaluation: F before and after the pod. Sharing pods try every GPU that fits and keep
// the best (lowest index among equal scores); other pods take what `taken` names.
}  // namespace

FragEval evalFragmentation(const NodeState& node, const GpuRequest& req, const ScoreContext& ctx,
                           uint64_t taken, double waste_weight) {
  const RequestMix& mix = ctx.mix ? *ctx.mix : RequestMix::defaults();
  const std::string& product = node.info().gpu_product;
  // Without a memo, the access bits: on the stack up to 256 typical requests.
  std::array<uint64_t, 4> small_access;
  std::vector<uint64_t> large_access;
  std::span<uint64_t> access;
  if (!ctx.cache) {
    const size_t words = (mix.entries().size() + 63) / 64;
    if (words <= small_access.size()) {
      access = std::span<uint64_t>(small_access).first(words);
    } else {
      large_access.resize(words);
      access = large_access;
    }
    mixAccessInto(mix, product, access);
  }
  std::array<int64_t, 64> buffer;
  const std::span<int64_t> free = freeMilliInto(node, buffer);
  const int64_t cpu = cpuLeft(node);
  const double before = fragOf(ctx, mix, product, access, cpu, free);
  FragEval best;
  if (req.shared()) {
    for (size_t g = 0; g < free.size(); ++g) {
      if (free[g] < req.milli_per_gpu) continue;
      free[g] -= req.milli_per_gpu;
      const double after = fragOf(ctx, mix, product, access, cpu - req.cpu_milli, free);
      free[g] += req.milli_per_gpu;
      const double waste =
          waste_weight > 0
              ? waste_weight * (mix.fragmentWaste(free[g] - req.milli_per_gpu) - mix.fragmentWaste(free[g]))
              : 0.0;
      const int points = fgdScore(before, after + waste);
      if (best.gpu < 0 || points > best.points) best = {points, after - before, static_cast<int>(g)};
    }
    return best;
  }
  for (uint64_t m = taken; m; m &= m - 1) free[static_cast<size_t>(std::countr_zero(m))] -= req.milli_per_gpu;
  const double after = fragOf(ctx, mix, product, access, cpu - req.cpu_milli, free);
  best.points = fgdScore(before, after);
  best.delta = after - before;
  return best;
}

double packAfter(const NodeState& node, const GpuRequest& req) {
  const int64_t capacity = static_cast<int64_t>(node.gpuCount()) * kMilliPerGpu;
  if (capacity == 0) return 0.0;
  return std::min(
      1.0, static_cast<double>(node.usedMilliTotal() + req.totalMilli()) / static_cast<double>(capacity));
}

int cpuLeftPercentAfter(const NodeState& node, const GpuRequest& req) {
  const int64_t capacity = node.info().cpu_milli;
  if (capacity <= 0) return 100;
  const int64_t left = std::clamp<int64_t>(capacity - node.cpuUsed() - req.cpu_milli, 0, capacity);
  return static_cast<int>(left * 100 / capacity);
}

Placement lowestFreePlacement(const NodeState& node, int gpus) {
  Placement p;
  uint64_t free = node.fullyFreeMask();
  for (int i = 0; i < gpus && free; ++i) {
    p.gpus.push_back(std::countr_zero(free));
    free &= free - 1;
  }
  return p;
}

int tightestGpu(const NodeState& node, int64_t milli) {
  int best = -1;
  for (int g = 0; g < node.gpuCount(); ++g) {
    if (node.gpuFreeMilli(g) < milli) continue;
    if (best < 0 || node.gpuFreeMilli(g) < node.gpuFreeMilli(best)) best = g;
  }
  return best;
}

void describePlacement(const model::GpuTopology& topology, Placement& p) {
  const int k = static_cast<int>(p.gpus.size());
  if (k < 2) {
    p.topology_quality = 1.0;
    p.best_possible = true;
    p.bottleneck = 0.0;
    return;
  }
  const uint64_t mask = model::indicesToMask(p.gpus);
  p.bottleneck = topology.bottleneck(mask);
  const double ideal = topology.bestBottleneck(k);
  p.topology_quality = ideal > 0 ? std::min(1.0, p.bottleneck / ideal) : 1.0;
  p.best_possible = p.topology_quality >= 1.0 - 1e-9;
}

Placement paperPlacement(const NodeState& node, const GpuRequest& req) {
  Placement p;
  if (req.shared()) {
    p.gpus = {tightestGpu(node, req.milli_per_gpu)};
  } else if (req.wantsGpus()) {
    p = lowestFreePlacement(node, req.gpus);
  }
  return p;
}

NodeScore paperScore(const NodeState& node, const GpuRequest& req, double value) {
  NodeScore out{value, paperPlacement(node, req)};
  describePlacement(node.topology(), out.placement);
  return out;
}

namespace {

class RulePolicy final : public Policy {
 public:
  explicit RulePolicy(ScoreRule rule) : rule_(std::move(rule)) {}
  std::string_view name() const override { return rule_.name; }
  TieBreak tieBreak() const override { return rule_.ties; }
  NodeScore score(const NodeState& node, const GpuRequest& req, const ScoreContext&) const override {
    return paperScore(node, req, rule_.value(node, req));
  }
  double unitScore(const NodeState& node, const GpuRequest& req, const Placement&,
                   const ScoreContext&) const override {
    return std::clamp(rule_.value(node, req) / rule_.full_scale, 0.0, 1.0);
  }

 private:
  ScoreRule rule_;
};

}  // namespace

PolicyEntry rulePolicy(ScoreRule rule) {
  std::string name = rule.name;
  return {std::move(name),
          [rule](const PolicyArgs&) -> PolicyPtr { return std::make_shared<RulePolicy>(rule); }};
}

}  // namespace troupe::sched
