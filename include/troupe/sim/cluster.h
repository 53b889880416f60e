// The simulated cluster: trace nodes turned into the same NodeInfo the live extender builds
// from Kubernetes node facts, and trace pods into the same GpuRequest it parses from pods.
//
// Topology: the trace names GPU types (G2, T4, V100M32, ...) but not how the GPUs connect, so
// each node gets the profile Troupe guesses for an unknown product (profileForProduct): pcie-8
// (switch pairs, two sockets) for 8 GPUs, pcie-4 (switch pairs) for 4, flat PCIe otherwise.
#pragma once

#include <cstdint>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/model/node.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sim/trace.h"

namespace troupe::sim {

// The artifact's node YAML gives every node room for 1,001 pods.
inline constexpr int64_t kTracePodLimit = 1001;

struct Cluster {
  std::vector<model::NodeInfo> nodes;  // sorted by name, the order the seeded ranks index
  int64_t gpus = 0;
  int64_t gpu_milli() const { return gpus * model::kMilliPerGpu; }
  // sched::CpuPerGpu over the nodes, as the live ClusterState counts it.
  double cpuPerGpu() const;
};

// Nodes without GPUs are left out (the FGD cluster is the GPU nodes). `catalog` shares
// topologies between nodes of one kind; give each thread its own.
Result<Cluster> buildCluster(const std::vector<TraceNode>& nodes, model::TopologyCatalog& catalog);

sched::GpuRequest requestOf(const TracePod& pod);

}  // namespace troupe::sim
