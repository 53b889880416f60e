#include "adapters/common/gpu_amount.h"

#include <cmath>
#include <sstream>

#include "troupe/common/quantity.h"

namespace troupe::adapters {

namespace {

// The largest amount a queue may state: far beyond any cluster, small enough that sums of
// many queues never overflow.
constexpr int64_t kMaxGpuMilli = int64_t{1} << 40;

}  // namespace

Result<int64_t> parseGpuAmount(std::string_view text) {
  const std::string shown(text.substr(0, 64));
  Result<int64_t> milli = parseQuantityMilli(text);
  if (!milli.isOk()) {
    return invalidArgument("is \"" + shown +
                           "\": must be a number of GPUs, whole (8) or a quantity such as \"2.5\" or "
                           "\"500m\" (half a GPU)");
  }
  if (milli.value() < 0) return invalidArgument("is \"" + shown + "\": must be 0 or more GPUs");
  if (milli.value() > kMaxGpuMilli) {
    return invalidArgument("is \"" + shown + "\": must be at most " + std::to_string(kMaxGpuMilli / 1000) +
                           " GPUs");
  }
  return milli.value();
}

std::string formatGpuAmount(int64_t milli) {
  const bool negative = milli < 0;
  const uint64_t m = negative ? 0 - static_cast<uint64_t>(milli) : static_cast<uint64_t>(milli);
  std::string out = (negative ? "-" : "") + std::to_string(m / 1000);
  if (uint64_t frac = m % 1000; frac != 0) {
    std::string digits = std::to_string(frac + 1000).substr(1);  // three digits, leading zeros kept
    while (digits.back() == '0') digits.pop_back();
    out += "." + digits;
  }
  return out;
}

Status checkQueueWeight(double weight) {
  if (std::isfinite(weight) && weight > 0) return Status::ok();
  std::ostringstream shown;
  shown << weight;
  return invalidArgument("is " + shown.str() +
                         ": must be a positive number (the queue's share among its siblings)");
}

}  // namespace troupe::adapters
