#include "troupe/sched/filter/filter_stage_hold.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace troupe::sched {

void holdBack(const FilterParts& parts, const std::string& queue, int64_t milli, const std::string& gang,
              FilterResult& out, std::vector<const model::NodeState*>* passed_nodes) {
  // One admission per product (there are few), then a product lookup per node.
  std::vector<std::pair<std::string, std::optional<std::string>>> by_product;
  size_t kept = 0;
  for (size_t i = 0; i < out.passed.size(); ++i) {
    const model::NodeState* node = passed_nodes ? (*passed_nodes)[i] : parts.cluster.find(out.passed[i]);
    if (!node) {  // unknown here: the filter behind refuses it with its own reason
      if (kept != i) out.passed[kept] = std::move(out.passed[i]);
      ++kept;
      continue;
    }
    const std::string& product = node->info().gpu_product;
    auto it =
        std::find_if(by_product.begin(), by_product.end(), [&](const auto& e) { return e.first == product; });
    if (it == by_product.end()) {
      by_product.emplace_back(product, parts.queues.admit(queue, milli, product, gang));
      it = by_product.end() - 1;
    }
    if (it->second) {
      out.failed.add(std::move(out.passed[i]), *it->second);
      ++out.categories["queue"];
      continue;
    }
    if (passed_nodes) (*passed_nodes)[kept] = node;
    if (kept != i) out.passed[kept] = std::move(out.passed[i]);  // never onto itself
    ++kept;
  }
  out.passed.resize(kept);
  if (passed_nodes) passed_nodes->resize(kept);
}

void holdForReclaim(const FilterParts& parts, const std::string& queue, FilterResult& out,
                    std::vector<const model::NodeState*>* passed_nodes) {
  const ReclaimBook::TimePoint t = parts.now();
  if (!parts.reclaim.holding(t)) return;  // the usual case: one lock per filter, not one per node
  size_t kept = 0;
  for (size_t i = 0; i < out.passed.size(); ++i) {
    if (std::optional<std::string> why = parts.reclaim.refusal(queue, out.passed[i], t)) {
      out.failed.add(std::move(out.passed[i]), *why);
      ++out.categories["reclaim"];
      continue;
    }
    if (kept != i) {  // a self-move would empty the name
      if (passed_nodes) (*passed_nodes)[kept] = (*passed_nodes)[i];
      out.passed[kept] = std::move(out.passed[i]);
    }
    ++kept;
  }
  out.passed.resize(kept);
  if (passed_nodes) passed_nodes->resize(kept);
}

bool holdStage(FilterCycle& cycle, const FilterParts& parts) {
  if (cycle.queue.empty() || cycle.kueue_placed) return true;  // Kueue's quota admitted a placed pod already
  std::vector<const model::NodeState*>* nodes = cycle.nodes_known ? &cycle.passed_nodes : nullptr;
  holdBack(parts, cycle.queue, cycle.request.totalMilli(), "", cycle.out, nodes);
  holdForReclaim(parts, cycle.queue, cycle.out, nodes);
  return true;
}

}  // namespace troupe::sched
