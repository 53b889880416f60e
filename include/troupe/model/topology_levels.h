// Network topology levels: where nodes sit in the data centre (zone, block, rack), read from
// node labels. The levels are label keys ordered from the widest to the narrowest; a node's
// value for a level names its domain there, cluster-wide, as Kubernetes topology keys do
// (rack "b1-r3", not "r3" in every block). Gangs use them to keep their members close.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe::model {

// topology.kubernetes.io/zone, troupe.dev/block, troupe.dev/rack.
const std::vector<std::string>& defaultTopologyLevels();

// The short name of a level: the last path segment of its label key ("troupe.dev/rack" ->
// "rack", "topology.kubernetes.io/zone" -> "zone").
std::string_view levelShortName(std::string_view key);

// The index of the level `name` names: its full label key, else its short name (any case),
// else an alias (any case) of its key; -1 when none does.
int findTopologyLevel(const std::vector<std::string>& levels, std::string_view name);

// The NVLink domain's label keys: the GPU Operator's nvidia.com/gpu.clique (one multi-node
// NVLink partition, e.g. a GB200 NVL72 rack) and Topograph's
// network.topology.nvidia.com/accelerator. Pods may name either level by the alias
// "nvlink-domain".
inline constexpr const char* kGpuCliqueLabel = "nvidia.com/gpu.clique";
inline constexpr const char* kTopographAcceleratorLabel = "network.topology.nvidia.com/accelerator";
inline constexpr const char* kNVLinkDomainAlias = "nvlink-domain";

// The alias of a level's key ("nvlink-domain" for the NVLink domain keys), else "".
std::string_view levelAlias(std::string_view key);

// What messages call a level: its alias, else its short name.
std::string levelDisplayName(std::string_view key);

// "zone (topology.kubernetes.io/zone), block (troupe.dev/block), rack (troupe.dev/rack)", for
// messages; an aliased level reads "nvlink-domain (nvidia.com/gpu.clique)".
std::string describeTopologyLevels(const std::vector<std::string>& levels);

// Problems with a list of levels, each naming the entry by index: not a label key, listed
// twice, a short name two levels share, or two levels one alias would name, or a short name
// that is an alias of another level (each would be ambiguous in pod annotations).
std::vector<std::string> validateTopologyLevels(const std::vector<std::string>& levels);

// The node's domain at each level: the label's value, "" where the node has no such label.
template <typename LabelMap>
std::vector<std::string> topologyDomains(const LabelMap& labels, const std::vector<std::string>& levels) {
  std::vector<std::string> out;
  out.reserve(levels.size());
  for (const std::string& key : levels) {
    auto it = labels.find(key);
    out.push_back(it == labels.end() ? std::string() : it->second);
  }
  return out;
}

}  // namespace troupe::model
