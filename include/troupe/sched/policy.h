// Scoring policies and their weights.
//
// troupe (default): a weighted sum of
//   pack      how full the node is after the placement (fill nodes before opening new ones)
//   topology  how well the chosen GPUs are connected: half relative to the best set this node
//             offers, half absolute (bottleneck GB/s against NVSwitch H100's 450)
//   domains   whether the placement keeps untouched NVLink domains whole
// binpack: pack only. spread: the emptiest node wins.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "troupe/common/status.h"

namespace troupe::sched {

enum class PolicyKind { kTroupe, kBinpack, kSpread };

struct PolicyConfig {
  PolicyKind kind = PolicyKind::kTroupe;
  double pack_weight = 0.5;      // >= 0
  double topology_weight = 0.4;  // >= 0
  double domain_weight = 0.1;    // >= 0; at least one weight > 0
};

const char* policyName(PolicyKind kind);
Result<PolicyKind> parsePolicy(std::string_view name);
std::vector<std::string> policyNames();
// Every problem, with its field path ("policy.weights.pack: must be >= 0, got -1").
std::vector<std::string> validatePolicy(const PolicyConfig& config);

}  // namespace troupe::sched
