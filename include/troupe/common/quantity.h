// Kubernetes resource quantities ("8", "500m", "40Gi", "1.5", "2e3") parsed without I/O.
#pragma once

#include <cstdint>
#include <string_view>

#include "troupe/common/status.h"

namespace troupe {

// The largest CPU (in millicores), memory (in bytes) or pod count Troupe accepts for a pod's
// request or a node's capacity: 2^56, about 72 PB or 72 billion cores. Far beyond any real
// machine, and small enough that the model's sums, differences and percentages (x100) of
// such amounts never overflow int64.
inline constexpr int64_t kMaxResourceAmount = int64_t{1} << 56;

// The quantity in thousandths of its unit, rounded up ("500m" -> 500, "2" -> 2000,
// "1Ki" -> 1024000). Fails on anything Kubernetes would reject, or on overflow.
Result<int64_t> parseQuantityMilli(std::string_view text);

// The quantity as a whole number of its unit, rounded up as Kubernetes does for Value()
// ("40Gi" -> 42949672960, "500m" -> 1).
Result<int64_t> parseQuantityValue(std::string_view text);

}  // namespace troupe
