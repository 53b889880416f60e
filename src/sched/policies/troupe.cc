// troupe: FGD's quantised fragmentation on the live request mix decides (for a share, counting
// also the eventual waste of the GPU part it takes). Its whole-point steps make near-equal nodes
// tie, and there a tie value (0..1, scaled below one point) chooses. Its regimes, one function
// each (tieValue picks):
//   gpuPodTie      a GPU pod: the weighted blend of
//                    topology  how well the chosen GPUs are connected, relative to the best set
//                              the node offers and absolute (bottleneck against NVSwitch H100)
//                    pack      smaller nodes first, keeping the big nodes whole for big jobs
//                    domains   whether untouched NVLink domains stay whole
//                    balance   (balanceApplies) whether the node's CPU and GPUs run out together,
//                              so that neither is left without the other
//   cpuBoundTie    a GPU pod while the mix is CPU-bound (RequestMix::cpuBound): the exact
//                  fragmentation change, since then the CPU a placement strands, too small for a
//                  whole point, decides what fits later; not while the mix also asks for whole
//                  nodes (then gpuPodTie)
//   cpuOnlyTie     a CPU-only pod: nodes whose GPUs are all taken first (its CPU strands no GPU
//                  there), then smaller nodes
//   cpuTightTie    a CPU-only pod while CPU is tight (RequestMix::cpuTight: CPU runs out about
//                  when GPUs do): the nodes with the most GPU in use first, and while some
//                  requests name GPU models, nodes whose free GPUs it would leave short of CPU last
// Apart from that value, ranking takes off points while GPU models are scarce (scarcityPenalty,
// model_pressure.h: requests that could run elsewhere leave the models that constrained requests
// will need) and while the mix asks for whole nodes (wholeNodePenalty, whole_node_pressure.h).
// Where the rest lives: FGD's fragmentation and the GPU choice (fragmentation.h, node_scoring.h),
// the mix and its CPU regimes (request_mix.h), the penalties' pressures (model_pressure.h,
// whole_node_pressure.h), the weights (policy_args.h). What each rule and constant gains,
// measured on the FGD trace and the sweep, is in
// docs/placement-quality.md#the-troupe-policys-constants; a re-measurement edits that page only.
#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <string>

#include "troupe/model/gpu_selection.h"
#include "troupe/sched/policies/policy_hooks.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/fragmentation.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {
namespace {

using model::NodeState;

// --- How the value is put together ---
// FGD's fragmentation points (fgdScore) lie in 0..100.
constexpr double kFgdPointsScale = 100.0;
// The tie value's share of a point: below one, so it orders only nodes of equal points and never
// overrides a point of difference.
constexpr double kTieScale = 0.99;
// unitScore's divisor: the next whole point above the highest value, so that unitScore < 1.
constexpr double kUnitScoreScale = kFgdPointsScale + 1.0;
static_assert(kFgdPointsScale + kTieScale < kUnitScoreScale);
// Half of the tie value's 0..1: two tiers split the range here, a squashed change centres on it.
constexpr double kHalf = 0.5;

// --- Fragmentation ---
// How much a share's points count the eventual waste of the GPU part it takes (RequestMix::
// fragmentWaste) beside FGD's fragmentation change. FGD alone splits GPUs into parts no common
// request fits (470 + 320 milli leave 210, where the next 230 or 320 does not fit); the waste
// alone ignores what the next request needs, so it is a minor term.
constexpr double kShareWasteWeight = 0.2;

// --- GPU pods: the blend ---
// Topology: the chosen set's quality relative to the best set this node offers, and how fast the
// set is (bottleneck against kReferenceBandwidth), in equal parts, so a multi-GPU pod prefers
// NVSwitch over PCIe and, on a node, its best GPUs.
constexpr double kRelativeTopologyShare = 0.5;
constexpr double kAbsoluteTopologyShare = 1.0 - kRelativeTopologyShare;
// The sharing part of the recent GPU request from which "smaller nodes first" (pack) applies:
// with fewer shares the fixed node order places better.
constexpr double kPackMinSharing = 0.25;
// The GPU pods' CPU load (RequestMix::gpuPodsCpuLoad: their CPU per GPU against the cluster's)
// from which the balance term counts. Where CPU is plentiful, CPU and GPUs do not run out
// together anyway and balancing them only spreads pods. The whole mix's load does not separate
// the cases where the term helps from those where it costs; CPU-only pods have their own rules.
constexpr double kBalanceMinCpuLoad = 0.6;
// The balance of a node with no GPU in use. Below 1: opening an untouched node costs as much as
// a 15% gap between free GPUs and CPU left. At 1 (or as its own balance), pods spread over empty
// nodes and break the whole nodes 8-GPU pods need.
constexpr double kUntouchedBalance = 0.85;
// smallFirst's scale: a node holds at most 64 GPUs (one bit each in a GPU mask), so 1 GPU ranks
// near 1 and a 64-GPU node at 0.
constexpr int kMostGpusPerNode = 64;

// --- CPU-only pods while CPU is tight ---
// How much smaller nodes first still counts beside the GPU in use, which decides.
constexpr double kTightSmallFirstShare = 0.1;
constexpr double kTightInUseShare = 1.0 - kTightSmallFirstShare;
static_assert(kTightInUseShare == 0.9);  // the measured 0.9, to the last bit

// --- Whole nodes for 8-GPU pods ---
// What using up room an 8-GPU pod needs (a whole node's fully free GPUs) costs a smaller request,
// in points, at pressure c on whole nodes (whole_node_pressure.h): kWholeNodeWeight * c / (c +
// kWholeNodeHalf). Saturating, so a mix with few 8-GPU pods (c small) barely moves, and up to
// c = 1 below a whole point, so it reorders nodes whose fragmentation is (near) equal and does
// not override a clear difference. Without it the small pods' ties (balance's opening cost,
// smaller nodes first) break whole nodes that FGD's fixed node order leaves alone.
constexpr double kWholeNodeWeight = 0.8;
constexpr double kWholeNodeHalf = 0.2;
static_assert(kWholeNodeWeight < 1.0);
// Past c = 1 the whole-node pods expected until the cluster is full outnumber the slots left, so
// each slot a smaller pod uses up is one of them turned away: the penalty then grows past a point,
// by up to kWholeNodeShortWeight more as c grows ((c - 1) / c), and overrides a fragmentation
// point. That happens near the end of a fill, where small pods broke the last whole nodes to
// save a point (5% model-limited: 3.3 8-GPU pods turned away a run -> 2.8, FGD 3.0).
constexpr double kWholeNodeShortWeight = 2.0;

// Two tiers in 0..1: every node with `first` above every node without; `within` (0..1) orders
// the nodes of a tier.
double tiered(bool first, double within) { return kHalf * (first ? 1.0 : 0.0) + kHalf * within; }

// 1 for a one-GPU node down to 0 for the largest: smaller nodes first.
double smallFirst(const NodeState& node) {
  return 1.0 - std::min(kMostGpusPerNode, node.gpuCount()) / static_cast<double>(kMostGpusPerNode);
}

class TroupePolicy final : public Policy, public PolicyHooks {
 public:
  explicit TroupePolicy(const TroupeArgs& args) : args_(args) {}

  std::string_view name() const override { return "troupe"; }
  bool sharesNodeValues() const override { return true; }
  bool usesLiveMix() const override { return true; }

  NodeScore score(const NodeState& node, const GpuRequest& req, const ScoreContext& ctx) const override {
    // Troupe's own GPU choice: the best-connected set (placeOnNode), then describe it.
    NodeScore out;
    if (req.wantsGpus() && !req.shared()) {
      if (std::optional<Placement> p = placeOnNode(node, req)) out.placement = *p;
    }
    describePlacement(node.topology(), out.placement);
    out.value = value(node, req, out.placement, ctx);
    return out;
  }

  double scarcityPenalty(const NodeState& node, const GpuRequest& req,
                         const ModelPressure& pressure) const override {
    if (!req.wantsGpus() || pressure.empty()) return 0.0;
    return args_.scarcity_weight * pressure.of(node.info().gpu_product);
  }

  double wholeNodePenalty(const NodeState& node, const GpuRequest& req,
                          const WholeNodePressure& pressure) const override {
    if (req.gpus >= kWholeNodeGpus || pressure.empty()) return 0.0;
    // The whole-node room this placement uses up, by the CPU sizes it had room for.
    const double c = pressure.usedUpBy(node, req);
    if (c <= 0) return 0.0;
    const double within_a_point = kWholeNodeWeight * c / (c + kWholeNodeHalf);
    return c <= 1.0 ? within_a_point : within_a_point + kWholeNodeShortWeight * (c - 1.0) / c;
  }

  uint32_t shareClass(const NodeState& node, const GpuRequest& req, const ScoreContext& ctx) const override {
    if (!req.wantsGpus()) return guardsFreeGpuCpu(ctx) && starvesFreeGpus(node, req, *ctx.mix) ? 1 : 0;
    if (!balanceApplies(ctx) || node.usedMilliTotal() == 0) return 0;
    return 1 + static_cast<uint32_t>(cpuLeftPercentAfter(node, req));
  }

  double unitScore(const NodeState& node, const GpuRequest& req, const Placement& placement,
                   const ScoreContext& ctx) const override {
    Placement p = placement;
    return value(node, req, p, ctx) / kUnitScoreScale;
  }

 private:
  // Fragmentation points plus the tie value below one point; a share takes the GPU that
  // fragments least.
  double value(const NodeState& node, const GpuRequest& req, Placement& placement,
               const ScoreContext& ctx) const {
    FragEval frag =
        evalFragmentation(node, req, ctx, model::indicesToMask(placement.gpus), kShareWasteWeight);
    if (req.shared() && frag.gpu >= 0) placement.gpus = {frag.gpu};
    return frag.points + kTieScale * tieValue(node, req, placement, ctx, frag.delta);
  }

  // 0..1, higher wins among equal points: the regime's rule. Reads only what SharedNodeValues
  // keys nodes by (and shareClass).
  double tieValue(const NodeState& node, const GpuRequest& req, const Placement& placement,
                  const ScoreContext& ctx, double frag_delta) const {
    if (!req.wantsGpus()) {
      return ctx.mix != nullptr && ctx.mix->cpuTight() ? cpuTightTie(node, req, ctx) : cpuOnlyTie(node);
    }
    // While a CPU-bound mix also asks for whole nodes, the usual blend (without balance, which is
    // off there) breaks the ties instead: with the exact change the last whole nodes went sooner
    // (3x CPU-only pods, run 1: none left at 75% arrived; 17 with the blend, FGD 13).
    if (ctx.mix != nullptr && ctx.mix->cpuBound() && ctx.mix->wholeNodeDemand().empty()) {
      return cpuBoundTie(frag_delta);
    }
    return gpuPodTie(node, req, placement, ctx);
  }

  // A CPU-only pod: nodes whose GPUs are all taken first (its CPU strands no GPU there), then
  // smaller nodes.
  static double cpuOnlyTie(const NodeState& node) {
    const int64_t capacity = int64_t{node.gpuCount()} * model::kMilliPerGpu;
    return tiered(node.usedMilliTotal() >= capacity, smallFirst(node));
  }

  // A CPU-only pod while CPU is tight: it piles up where GPUs are in use, keeping CPU beside the
  // free GPUs; under the guard, nodes whose free GPUs it would starve of CPU come last.
  static double cpuTightTie(const NodeState& node, const GpuRequest& req, const ScoreContext& ctx) {
    const int64_t capacity = int64_t{node.gpuCount()} * model::kMilliPerGpu;
    const double in_use = capacity > 0 ? static_cast<double>(node.usedMilliTotal()) / capacity : 1.0;
    const double fill = kTightInUseShare * in_use + kTightSmallFirstShare * smallFirst(node);
    if (!guardsFreeGpuCpu(ctx)) return fill;
    return tiered(!starvesFreeGpus(node, req, *ctx.mix), fill);
  }

  // A GPU pod while the mix is CPU-bound: the fragmentation change (milli-GPU), squashed to
  // 0..1 around kHalf at the scale of one GPU: less is better.
  static double cpuBoundTie(double frag_delta) {
    return kHalf - kHalf * frag_delta / (std::abs(frag_delta) + static_cast<double>(model::kMilliPerGpu));
  }

  // While constrained requests are in the window, model pressure keeps unconstrained GPU pods off
  // the models they need, so GPU pods crowd the other nodes, and CPU-only pods piling onto the
  // fullest of those take the CPU their last free GPUs need. Then a node a CPU-only pod would
  // starve comes after every node it would not. Without constrained requests the guard costs, so
  // it is off there. Only CPU-tight mixes have the rule it guards.
  static bool guardsFreeGpuCpu(const ScoreContext& ctx) {
    return ctx.mix != nullptr && ctx.mix->cpuTight() && !ctx.mix->constrained().empty();
  }

  // True when the CPU left after `req` is less than the node's free GPUs will want, at the mix's
  // GPU requests' CPU per GPU.
  static bool starvesFreeGpus(const NodeState& node, const GpuRequest& req, const RequestMix& mix) {
    const int64_t free_milli = node.freeMilliTotal();
    if (free_milli <= 0 || node.info().cpu_milli <= 0) return false;
    const double left = static_cast<double>(cpuLeft(node) - req.cpu_milli);
    return left < static_cast<double>(free_milli) * mix.gpuPodsCpuPerGpu();
  }

  // Balance counts while the typical GPU requests ask at least kBalanceMinCpuLoad of the
  // cluster's CPU per GPU for themselves, and the mix is not CPU-bound (there the exact
  // fragmentation change decides).
  bool balanceApplies(const ScoreContext& ctx) const {
    return args_.balance_weight > 0 && ctx.mix != nullptr &&
           ctx.mix->gpuPodsCpuLoad() >= kBalanceMinCpuLoad && !ctx.mix->cpuBound();
  }

  // 0..1: 1 - |free GPU fraction - CPU left fraction| after the pod, CPU in whole percent (what
  // shareClass keys nodes by). A node whose CPU runs out first strands its free GPUs; one whose
  // GPUs run out first strands CPU the next GPU pod there would have needed.
  static double balance(const NodeState& node, const GpuRequest& req) {
    if (node.usedMilliTotal() == 0) return kUntouchedBalance;
    const double capacity = static_cast<double>(int64_t{node.gpuCount()} * model::kMilliPerGpu);
    const double gpu_free =
        (capacity - static_cast<double>(node.usedMilliTotal() + req.totalMilli())) / capacity;
    const double cpu_left = cpuLeftPercentAfter(node, req) / 100.0;
    return 1.0 - std::abs(gpu_free - cpu_left);
  }

  // 0..1: the share of the untouched NVLink domains (of 2+ GPUs) that this placement keeps whole.
  static double domainsKept(const NodeState& node, const Placement& placement) {
    const uint64_t free = node.fullyFreeMask();
    const uint64_t taken = model::indicesToMask(placement.gpus);
    int intact = 0, broken = 0;
    for (uint64_t d : node.topology().nvlinkDomains()) {
      if (std::popcount(d) < 2 || (d & free) != d) continue;
      ++intact;
      if ((d & taken) != 0 && (d & taken) != d) ++broken;
    }
    return intact == 0 ? 1.0 : 1.0 - static_cast<double>(broken) / intact;
  }

  // 0..1: how well the chosen GPUs are connected (1 where the pod does not care).
  static double topologyTerm(const GpuRequest& req, const Placement& placement) {
    if (req.gpus <= 1 || req.topology == TopologyMode::kNone) return 1.0;
    return kRelativeTopologyShare * placement.topology_quality +
           kAbsoluteTopologyShare * std::min(1.0, placement.bottleneck / kReferenceBandwidth);
  }

  // A GPU pod: 0..1, the weighted pack, topology, domains and (where it applies) balance terms.
  double gpuPodTie(const NodeState& node, const GpuRequest& req, const Placement& placement,
                   const ScoreContext& ctx) const {
    const double domains = domainsKept(node, placement);
    const double topology = topologyTerm(req, placement);
    const double small_first = smallFirst(node);
    // Pack only while shares carry kPackMinSharing of the recent GPU request; before any request
    // is seen (the default mix) every term counts.
    const bool seen = ctx.mix != nullptr && ctx.mix != &RequestMix::defaults();
    const double pack = !seen || ctx.mix->sharingShare() >= kPackMinSharing ? args_.pack_weight : 0.0;
    const double balance_weight = balanceApplies(ctx) ? args_.balance_weight : 0.0;
    const double total = args_.pack_weight + args_.topology_weight + args_.domain_weight + balance_weight;
    if (total <= 0) return 0.0;
    return (pack * small_first + args_.topology_weight * topology + args_.domain_weight * domains +
            (balance_weight > 0 ? balance_weight * balance(node, req) : 0.0)) /
           total;
  }

  TroupeArgs args_;
};

}  // namespace

std::vector<std::string> validateTroupeArgs(const TroupeArgs& a) {
  std::vector<std::string> errors;
  auto nonNegative = [&](double v, const char* field) {
    if (v < 0)
      errors.push_back(std::string("policy.weights.") + field + ": must be >= 0, got " + std::to_string(v));
  };
  nonNegative(a.pack_weight, "pack");
  nonNegative(a.topology_weight, "topology");
  nonNegative(a.domain_weight, "domains");
  nonNegative(a.balance_weight, "balance");
  nonNegative(a.scarcity_weight, "scarcity");
  if (a.pack_weight + a.topology_weight + a.domain_weight <= 0) {
    errors.push_back("policy.weights: at least one of pack, topology, domains must be > 0");
  }
  return errors;
}

PolicyEntry troupePolicy() {
  return {"troupe",
          [](const PolicyArgs& args) -> PolicyPtr { return std::make_shared<TroupePolicy>(args.troupe); }};
}

}  // namespace troupe::sched
