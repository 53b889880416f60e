// How many GPUs the request sizes alone leave idle: the arrived GPU requests packed with
// hindsight into the cluster's GPUs, whole-GPU requests first (a whole GPU wastes nothing),
// then the shares best-fit decreasing. CPU, memory, nodes and GPU models are left out, so the
// packing is looser than any real one. It is an estimate, not a proof (best-fit decreasing is
// not always optimal), of the floor under every placement policy: what is left between a
// policy's figure and this one is what placement can still win (docs/placement-quality.md).
#pragma once

#include <cstdint>
#include <span>

#include "troupe/sched/request/pod_request.h"

namespace troupe::sim {

// Milli-GPU of `gpus` GPUs left unallocated after packing `arrived` (non-GPU requests ignored).
int64_t hindsightIdleMilli(std::span<const sched::GpuRequest* const> arrived, int64_t gpus);

}  // namespace troupe::sim
