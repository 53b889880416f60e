// Kubernetes resource quantities ("8", "500m", "40Gi", "1.5", "2e3") parsed without I/O.
#pragma once

#include <cstdint>
#include <string_view>

#include "troupe/common/status.h"

namespace troupe {

// The quantity in thousandths of its unit, rounded up ("500m" -> 500, "2" -> 2000,
// "1Ki" -> 1024000). Fails on anything Kubernetes would reject, or on overflow.
Result<int64_t> parseQuantityMilli(std::string_view text);

// The quantity as a whole number of its unit, rounded up as Kubernetes does for Value()
// ("40Gi" -> 42949672960, "500m" -> 1).
Result<int64_t> parseQuantityValue(std::string_view text);

}  // namespace troupe
