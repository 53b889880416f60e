#include "troupe/model/topology_presets.h"

#include "troupe/model/topology_levels.h"

namespace troupe::model {

const std::vector<TopologyPreset>& topologyPresets() {
  // Every scheme's values name a domain cluster-wide (switch and NVLink partition IDs, cloud
  // block/host IDs), which Troupe requires: it groups nodes by a level's value alone.
  static const std::vector<TopologyPreset> presets{
      {"default", defaultTopologyLevels(), "Troupe's own labels under the standard zone"},
      // An NVL72 rack is one NVLink domain, so the clique sits below the rack; the GPU
      // Operator's value <ClusterUUID>.<CliqueID> is unique per fabric partition.
      {"nvidia-nvl72",
       {"topology.kubernetes.io/zone", "troupe.dev/block", "troupe.dev/rack", kGpuCliqueLabel},
       "NVIDIA GPU Operator (GPU feature discovery) under Troupe's labels"},
      // Switch tiers from the top down, then the NVLink domain (accelerator).
      {"nvidia-topograph",
       {"network.topology.nvidia.com/core", "network.topology.nvidia.com/spine",
        "network.topology.nvidia.com/leaf", kTopographAcceleratorLabel},
       "NVIDIA Topograph"},
      {"gke",
       {"cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-host"},
       "Google Kubernetes Engine (compact placement, reservations)"},
      // Layer 1 is the top of the instance topology, layer 3 the network node the instance
      // hangs off.
      {"aws",
       {"topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3"},
       "Amazon EKS (EC2 instance topology)"},
  };
  return presets;
}

const TopologyPreset* findTopologyPreset(std::string_view name) {
  for (const TopologyPreset& p : topologyPresets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string topologyPresetNames() {
  std::string out;
  for (const TopologyPreset& p : topologyPresets()) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

}  // namespace troupe::model
