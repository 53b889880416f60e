// Milli-GPU amounts as people read them: 2500 -> "2.5", 16000 -> "16". Queue reasons, statuses
// and validation errors all print GPUs this way.
#pragma once

#include <cstdint>
#include <string>

namespace troupe::sched {

// Whole GPUs with up to three decimals, trailing zeros dropped ("0.125", "2.5", "16", "-1").
std::string gpusText(int64_t milli);

}  // namespace troupe::sched
