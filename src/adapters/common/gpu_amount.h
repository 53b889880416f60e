// GPU amounts as a Queue's spec and the `queues:` config section write them: a whole number of
// GPUs (8) or a Kubernetes quantity ("2.5", "500m" = half a GPU), held as milli-GPUs. Shared by
// the Kubernetes and YAML adapters, which read the same fields from JSON and from YAML.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "troupe/common/status.h"

namespace troupe::adapters {

// Milli-GPUs of `text` ("8" -> 8000, "2.5" -> 2500, "500m" -> 500); it reads sched::gpusText's
// output back to the same value. The error says what was given and what is accepted, without
// the field's name (the caller adds it).
Result<int64_t> parseGpuAmount(std::string_view text);

// A queue's weight: a positive finite number. The error says what was given and the fix.
Status checkQueueWeight(double weight);

}  // namespace troupe::adapters
