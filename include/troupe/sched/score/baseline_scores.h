// The scoring rules Troupe is compared against, as the FGD artifact implements them (integer
// scores 0..100, higher wins), plus the stock kube-scheduler's resource scoring. Each takes a
// node that already passed checkNode and the pod's request.
#pragma once

#include <cstdint>

#include "troupe/model/node.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

// The largest node of the openb cluster, which the artifact normalises by.
inline constexpr int64_t kBaselineMaxCpuMilli = 128000;
inline constexpr int64_t kBaselineMaxGpuMilli = 8000;

// Least weighted leftover: 0.5 CPU + 0.5 GPU, each against the largest node.
int64_t bestFitScore(const model::NodeState& node, const GpuRequest& req);
// Tetris: 1 - the dot product of the node's free vector and the pod's request (CPU, GPU).
int64_t dotProductScore(const model::NodeState& node, const GpuRequest& req);
// Rule bands: already shared GPUs first (tighter is better), then used nodes that open the
// fewest fresh GPUs, then untouched nodes (smaller first). CPU-only pods score 0.
int64_t gpuPackingScore(const model::NodeState& node, const GpuRequest& req);
// Rule bands by the kinds of GPU pods a node hosts (sharing, 1, 2, 4, 8 GPUs), plus fullness.
int64_t gpuClusteringScore(const model::NodeState& node, const GpuRequest& req);
// kube-scheduler's defaults: NodeResourcesFit LeastAllocated plus BalancedAllocation, both on
// CPU and memory (GPUs are an extended resource, which the defaults do not score); 0..200.
int64_t kubeDefaultScore(const model::NodeState& node, const GpuRequest& req);

}  // namespace troupe::sched
