#include "adapters/http/extender_scores.h"

#include <algorithm>
#include <cmath>

#include "troupe/sched/score/best_node.h"

namespace troupe::http {

std::vector<HostScore> extenderScores(const std::vector<sched::HostValue>& values) {
  std::vector<HostScore> out;
  out.reserve(values.size());
  double lo = 1e300, hi = -1e300;
  for (const sched::HostValue& v : values) {
    if (v.value < 0) continue;
    lo = std::min(lo, v.value);
    hi = std::max(hi, v.value);
  }
  // Values within 1e-12 are equal here: they come from floating-point blends.
  const sched::HostValue* best = nullptr;
  uint64_t best_rank = 0;
  for (const sched::HostValue& v : values) {
    if (v.value < 0) continue;
    const uint64_t rank = sched::nodeTieRank(v.host);
    if (!best || v.value > best->value + 1e-12 ||
        (std::abs(v.value - best->value) <= 1e-12 && rank < best_rank)) {
      best = &v;
      best_rank = rank;
    }
  }
  for (const sched::HostValue& v : values) {
    int64_t s = 0;
    if (&v == best) {
      s = 10;
    } else if (v.value >= 0) {
      s = hi > lo ? static_cast<int64_t>(std::floor(9.0 * (v.value - lo) / (hi - lo))) : 9;
      s = std::clamp<int64_t>(s, 0, 9);
    }
    out.push_back({v.host, s});
  }
  return out;
}

}  // namespace troupe::http
