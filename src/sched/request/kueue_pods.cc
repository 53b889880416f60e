#include "troupe/sched/request/kueue_pods.h"

#include <algorithm>

#include "troupe/common/strings.h"
#include "troupe/model/pod_contract.h"
#include "troupe/model/topology_presets.h"

namespace troupe::sched {
namespace {

bool topologyKey(const std::string& key, const std::vector<std::string>& levels) {
  if (key == kHostnameLabel) return true;
  if (std::find(levels.begin(), levels.end(), key) != levels.end()) return true;
  for (const model::TopologyPreset& p : model::topologyPresets()) {
    if (std::find(p.levels.begin(), p.levels.end(), key) != p.levels.end()) return true;
  }
  return false;
}

}  // namespace

bool schedulingGated(const PodFacts& pod) { return !pod.scheduling_gates.empty(); }

bool kueuePlaced(const PodFacts& pod, const std::vector<std::string>& levels) {
  auto tas = pod.labels.find(kKueueTasLabel);
  if (tas == pod.labels.end() || !equalsIgnoreCase(trim(tas->second), "true")) return false;
  return std::any_of(pod.node_selector.begin(), pod.node_selector.end(), [&](const auto& entry) {
    return !entry.second.empty() && topologyKey(entry.first, levels);
  });
}

}  // namespace troupe::sched
