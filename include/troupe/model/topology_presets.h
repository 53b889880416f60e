// Presets of the network topology levels: the label schemes that GPU clusters already carry,
// so that `topology.preset: nvidia-topograph` replaces typing the keys. Each lists its keys
// widest first, as topology.levels does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe::model {

struct TopologyPreset {
  std::string name;
  std::vector<std::string> levels;  // widest first
  std::string source;               // who writes these labels, for docs and messages
};

// default, nvidia-nvl72, nvidia-topograph, gke, aws.
const std::vector<TopologyPreset>& topologyPresets();

// The preset of that name (exact, lower case); nullptr when there is none.
const TopologyPreset* findTopologyPreset(std::string_view name);

// "default, nvidia-nvl72, nvidia-topograph, gke, aws", for messages.
std::string topologyPresetNames();

}  // namespace troupe::model
