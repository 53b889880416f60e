#include "troupe/sched/policy.h"

#include "troupe/common/strings.h"

namespace troupe::sched {

const char* policyName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kTroupe: return "troupe";
    case PolicyKind::kFgd: return "fgd";
    case PolicyKind::kBestFit: return "best-fit";
    case PolicyKind::kDotProduct: return "dot-product";
    case PolicyKind::kGpuPacking: return "gpu-packing";
    case PolicyKind::kGpuClustering: return "gpu-clustering";
    case PolicyKind::kRandom: return "random";
    case PolicyKind::kKube: return "kube";
    case PolicyKind::kBinpack: return "binpack";
    case PolicyKind::kSpread: return "spread";
  }
  return "?";
}

std::vector<PolicyKind> allPolicies() {
  return {PolicyKind::kTroupe,     PolicyKind::kFgd,           PolicyKind::kBestFit, PolicyKind::kDotProduct,
          PolicyKind::kGpuPacking, PolicyKind::kGpuClustering, PolicyKind::kRandom,  PolicyKind::kKube,
          PolicyKind::kBinpack,    PolicyKind::kSpread};
}

std::vector<std::string> policyNames() {
  std::vector<std::string> names;
  for (PolicyKind k : allPolicies()) names.push_back(policyName(k));
  return names;
}

Result<PolicyKind> parsePolicy(std::string_view name) {
  for (PolicyKind k : allPolicies()) {
    if (name == policyName(k)) return k;
  }
  return invalidArgument("unknown policy \"" + std::string(name) + "\"; expected one of " +
                         joinList(policyNames(), ", "));
}

std::vector<std::string> validatePolicy(const PolicyConfig& c) {
  std::vector<std::string> errors;
  auto nonNegative = [&](double v, const char* field) {
    if (v < 0)
      errors.push_back(std::string("policy.weights.") + field + ": must be >= 0, got " + std::to_string(v));
  };
  nonNegative(c.pack_weight, "pack");
  nonNegative(c.topology_weight, "topology");
  nonNegative(c.domain_weight, "domains");
  if (c.pack_weight + c.topology_weight + c.domain_weight <= 0) {
    errors.push_back("policy.weights: at least one of pack, topology, domains must be > 0");
  }
  return errors;
}

}  // namespace troupe::sched
