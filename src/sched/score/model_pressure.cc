#include "troupe/sched/score/model_pressure.h"

#include <algorithm>

#include "troupe/common/strings.h"

namespace troupe::sched {

ModelPressure ModelPressure::compute(const RequestMix& mix,
                                     const std::vector<std::pair<std::string, int64_t>>& free_by_product) {
  ModelPressure out;
  if (mix.constrained().empty()) return out;
  int64_t free_all = 0;
  for (const auto& [product, free] : free_by_product) free_all += std::max<int64_t>(0, free);
  if (free_all <= 0) return out;
  std::vector<double> pressure(free_by_product.size(), 0.0);
  std::vector<size_t> named;
  for (const ConstrainedShare& list : mix.constrained()) {
    named.clear();
    int64_t free_of_list = 0;
    for (size_t i = 0; i < free_by_product.size(); ++i) {
      const std::string& product = free_by_product[i].first;
      if (std::any_of(list.models.begin(), list.models.end(),
                      [&](const std::string& m) { return equalsIgnoreCase(m, product); })) {
        named.push_back(i);
        free_of_list += std::max<int64_t>(0, free_by_product[i].second);
      }
    }
    // A list whose models are all full cannot be helped by steering anyone.
    if (free_of_list <= 0) continue;
    const double p = list.share * static_cast<double>(free_all) / static_cast<double>(free_of_list);
    for (size_t i : named) pressure[i] += p;
  }
  for (size_t i = 0; i < free_by_product.size(); ++i) {
    if (pressure[i] > 0) out.by_product_.emplace_back(free_by_product[i].first, pressure[i]);
  }
  return out;
}

double ModelPressure::of(std::string_view product) const {
  for (const auto& [p, v] : by_product_) {
    if (equalsIgnoreCase(p, product)) return v;
  }
  return 0.0;
}

void FreeGpuByProduct::add(const model::NodeState& node) {
  if (node.gpuCount() == 0) return;
  const std::string& product = node.info().gpu_product;
  auto it = std::find_if(free_.begin(), free_.end(), [&](const auto& p) { return p.first == product; });
  if (it == free_.end()) it = free_.insert(free_.end(), {product, 0});
  it->second += node.freeMilliTotal();
}

}  // namespace troupe::sched
