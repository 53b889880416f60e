// Scoring policies and their weights.
//
// troupe (default): fragmentation first, measured against the mix of requests seen recently
//   (FGD's idea, on the live mix), then topology and packing:
//   fragmentation  how much the placement raises the node's expected fragmentation, quantised
//                  like FGD's integer score so that near-equal nodes tie and fill in a fixed order
//   topology       how well the chosen GPUs are connected: half relative to the best set this
//                  node offers, half absolute (bottleneck GB/s against NVSwitch H100's 450)
//   pack           smaller nodes (fewer GPUs) first, keeping the big nodes whole for big jobs
//   domains        whether untouched NVLink domains stay whole
//   Fragmentation decides; topology, pack and domains (weighted) only break its ties.
// fgd, best-fit, dot-product, gpu-packing, gpu-clustering, random: the FGD paper's policies,
//   as its artifact scores them (see baseline_scores.h and fragmentation.h).
// kube: the stock kube-scheduler's resource scoring (least allocated + balanced CPU/memory).
// binpack: the fullest node wins. spread: the emptiest node wins.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "troupe/common/status.h"

namespace troupe::sched {

enum class PolicyKind {
  kTroupe,
  kFgd,
  kBestFit,
  kDotProduct,
  kGpuPacking,
  kGpuClustering,
  kRandom,
  kKube,
  kBinpack,
  kSpread,
};

struct PolicyConfig {
  PolicyKind kind = PolicyKind::kTroupe;
  double pack_weight = 0.5;      // >= 0
  double topology_weight = 0.4;  // >= 0
  double domain_weight = 0.1;    // >= 0; at least one weight > 0
};

const char* policyName(PolicyKind kind);
Result<PolicyKind> parsePolicy(std::string_view name);
std::vector<std::string> policyNames();
std::vector<PolicyKind> allPolicies();
// Every problem, with its field path ("policy.weights.pack: must be >= 0, got -1").
std::vector<std::string> validatePolicy(const PolicyConfig& config);

}  // namespace troupe::sched
