#include "troupe/sched/cluster/gpu_amount.h"

namespace troupe::sched {

std::string gpusText(int64_t milli) {
  const bool negative = milli < 0;
  // Negate in unsigned arithmetic: -INT64_MIN does not fit an int64_t.
  const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(milli) : static_cast<uint64_t>(milli);
  std::string text = (negative ? "-" : "") + std::to_string(magnitude / 1000);
  uint64_t frac = magnitude % 1000;
  if (frac != 0) {
    std::string digits = std::to_string(frac);
    digits.insert(0, 3 - digits.size(), '0');
    while (digits.back() == '0') digits.pop_back();
    text += "." + digits;
  }
  return text;
}

}  // namespace troupe::sched
