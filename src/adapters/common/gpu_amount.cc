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

Status checkQueueWeight(double weight) {
  if (std::isfinite(weight) && weight > 0) return Status::ok();
  std::ostringstream shown;
  shown << weight;
  return invalidArgument("is " + shown.str() +
                         ": must be a positive number (the queue's share among its siblings)");
}

}  // namespace troupe::adapters
