// Test helpers: where the shared reference material is, and builders for nodes and pods.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::testing {

// ../shared (TROUPE_SHARED_DIR), or nullopt when it is not there.
std::optional<std::string> sharedDir();
// The repository root (TROUPE_SOURCE_DIR).
std::string sourceDir();
// Whole file contents; empty optional when unreadable.
std::optional<std::string> readFile(const std::string& path);

// A node with `gpus` GPUs of `product` (memory in MiB); labels as GPU feature discovery sets.
model::NodeFacts gpuNode(const std::string& name, int gpus,
                         const std::string& product = "NVIDIA-H100-80GB-HBM3", int64_t memory_mib = 81559);

// A pod asking `gpus` whole GPUs through nvidia.com/gpu limits, with extra annotations.
sched::PodFacts gpuPod(const std::string& name, int gpus, const sched::StringMap& annotations = {});

// A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it), for test servers.
int freeLoopbackPort();

}  // namespace troupe::testing
