// Choosing which GPUs of a node a pod gets.
//
// Whole GPUs: among the free GPUs, the k-set with the highest bottleneck bandwidth; among
// equals, the one that leaves the best-connected blocks for later pods (the best bottleneck
// still available for 2, 4 and 8 GPUs among what stays free); then the highest total internal
// bandwidth; then the lowest indices. Exhaustive when at most kExhaustiveLimit sets exist
// (every 8-GPU node), greedy growth otherwise. Choices are memoised per topology, keyed by the
// free mask, so 10,000 nodes in a handful of states cost a handful of searches.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "troupe/model/topology.h"

namespace troupe::model {

inline constexpr uint64_t kExhaustiveLimit = 5000;

struct GpuSet {
  uint64_t mask = 0;
  double bottleneck = 0.0;  // GB/s, the slowest pair inside the set
  double quality = 0.0;     // bottleneck / best bottleneck any k GPUs of this node can have
  double leftover = 0.0;    // how well-connected what stays free is (0..1)
};

std::vector<int> maskToIndices(uint64_t mask);
uint64_t indicesToMask(const std::vector<int>& gpus);
int64_t binomial(int n, int k);

// The best k GPUs among `free_mask`; with `one_domain`, only sets inside one NVLink domain.
std::optional<GpuSet> chooseWholeGpus(const GpuTopology& topology, uint64_t free_mask, int k,
                                      bool one_domain);

// The same search without the memo (reference for tests and for one-off topologies).
std::optional<GpuSet> searchWholeGpus(const GpuTopology& topology, uint64_t free_mask, int k,
                                      bool one_domain);

std::shared_ptr<GpuTopology::SelectionMemo> newSelectionMemo();

}  // namespace troupe::model
