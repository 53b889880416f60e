// The live defragmentation advice's settings (Kubernetes mode, docs/defrag.md): one struct, read
// from the config file's defrag section (adapters/yaml) and taken as it is by the kube adapter's
// DefragAdvisor, so the two never drift apart.
#pragma once

#include <chrono>
#include <cstddef>

namespace troupe::adapters {

struct DefragOptions {
  bool enabled = true;
  std::chrono::milliseconds interval{std::chrono::seconds(30)};
  int min_gpus = 4;
  std::chrono::milliseconds min_pending{std::chrono::seconds(60)};
  int max_moves = 4;
  bool evict = false;
  // Not a config key: pending pods (gangs) planned for per round, the longest waiting first.
  size_t max_asks = 32;
};

}  // namespace troupe::adapters
