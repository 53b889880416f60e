#include "troupe/sched/filter/node_filter.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "troupe/sched/cluster/shared_node_values.h"
#include "troupe/sched/score/best_node.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {
namespace {

constexpr const char* kUnknownNode =
    "troupe: node unknown to Troupe (no GPU facts yet; check its nvidia.com/gpu labels, or "
    "that Troupe watches the cluster)";

}  // namespace

FilterResult filterEachNode(const NodeIndex& index, const GpuRequest& req,
                            const std::vector<std::string>& node_names, const DrainOwner& drain_owner,
                            const std::string& own_gang, std::vector<const model::NodeState*>* passed_nodes) {
  FilterResult out;
  // Every candidate is looked up first, in a batch whose cache misses overlap (at thousands
  // of nodes the nodes no longer fit in cache), then checked in order.
  std::vector<const model::NodeState*> found(node_names.size(), nullptr);
  index.findAll(node_names, found);
  out.passed.reserve(node_names.size());
  if (passed_nodes) passed_nodes->reserve(node_names.size());
  // Each distinct misfit is worded once per call (the model misfit once per GPU product), and
  // rejections are counted per misfit, then added to the category map at the end.
  constexpr NodeReasons::ReasonId kUnworded = ~NodeReasons::ReasonId{0};
  std::array<NodeReasons::ReasonId, kMisfitKinds> worded;
  worded.fill(kUnworded);
  std::vector<std::pair<std::string_view, NodeReasons::ReasonId>> model_worded;
  std::array<int, kMisfitKinds> misfits{};
  int unknown = 0;
  const bool draining = static_cast<bool>(drain_owner);
  for (size_t i = 0; i < node_names.size(); ++i) {
    const std::string& name = node_names[i];
    const model::NodeState* node = found[i];
    if (!node) {
      out.unresolvable.add(name, kUnknownNode);
      ++unknown;
      continue;
    }
    if (draining && req.wantsGpus()) {
      if (std::string owner = drain_owner(name); !owner.empty() && owner != own_gang) {
        out.failed.add(name, "troupe: node is kept free for gang " + owner + ", which has waited too long");
        ++out.categories["drain"];
        continue;
      }
    }
    const Misfit misfit = req.wantsGpus() ? findMisfit(*node, req) : Misfit::kNone;
    if (misfit == Misfit::kNone) {
      out.passed.push_back(name);
      if (passed_nodes) passed_nodes->push_back(node);
      continue;
    }
    ++misfits[static_cast<size_t>(misfit)];
    NodeReasons& reasons = fitOf(misfit) == Fit::kBusy ? out.failed : out.unresolvable;
    NodeReasons::ReasonId id = worded[static_cast<size_t>(misfit)];
    if (misfit == Misfit::kModel) {
      const std::string& product = node->info().gpu_product;
      auto same = [&](const auto& e) { return e.first == product; };
      if (auto w = std::find_if(model_worded.begin(), model_worded.end(), same); w != model_worded.end()) {
        id = w->second;
      } else {
        id = reasons.intern(describeMisfit(misfit, *node, req));
        model_worded.emplace_back(product, id);
      }
    } else if (id == kUnworded) {
      id = reasons.intern(describeMisfit(misfit, *node, req));
      worded[static_cast<size_t>(misfit)] = id;
    }
    reasons.add(name, id);
  }
  if (unknown) out.categories["unknown-node"] += unknown;
  for (size_t m = 0; m < kMisfitKinds; ++m) {
    if (misfits[m]) out.categories[categoryOf(static_cast<Misfit>(m))] += misfits[m];
  }
  return out;
}

int narrowToBest(const Policy& policy, const GpuRequest& req, const std::shared_ptr<const RequestMix>& mix,
                 ScoreMemo* memo, const std::vector<const model::NodeState*>& nodes, FilterResult& out,
                 const ModelPressure* pressure, const WholeNodePressure* whole) {
  const ScoreContext context{mix.get(), nullptr};
  // Nodes in the same scoring state (profile, GPUs in use, ...) share one computed value.
  SharedNodeValues shared(policy, req, context);
  auto score = [&](const model::NodeState& node) { return shared.value(node); };
  std::vector<double> values(nodes.size());
  if (memo) {
    memo->values(nodes, req, mix, score, values);
  } else {
    for (size_t i = 0; i < nodes.size(); ++i) values[i] = score(*nodes[i]);
  }
  // The scarcity term moves with every placement, so it is never memoised with the values.
  if (pressure && !pressure->empty()) {
    for (size_t i = 0; i < nodes.size(); ++i) values[i] -= policy.scarcityPenalty(*nodes[i], req, *pressure);
  }
  if (whole && !whole->empty()) {
    for (size_t i = 0; i < nodes.size(); ++i) values[i] -= policy.wholeNodePenalty(*nodes[i], req, *whole);
  }
  const int best = bestByValue(policy, nodes, values);
  // The other fitting nodes are left out of the answer, not listed in FailedNodes: kube-scheduler
  // takes the nodes an extender returns and records a status only for those it names, so each
  // listed node costs it decoding and a status per pod (at 5,000 nodes ~300 KB of JSON per pod,
  // more than the rest of its scheduling cycle); no one reads them, since the pod is schedulable.
  std::string keep = std::move(out.passed[static_cast<size_t>(best)]);
  out.passed.assign(1, std::move(keep));
  return best;
}

}  // namespace troupe::sched
