#include "troupe/sched/policy.h"

namespace troupe::sched {

const char* policyName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kTroupe: return "troupe";
    case PolicyKind::kBinpack: return "binpack";
    case PolicyKind::kSpread: return "spread";
  }
  return "?";
}

std::vector<std::string> policyNames() { return {"troupe", "binpack", "spread"}; }

Result<PolicyKind> parsePolicy(std::string_view name) {
  for (PolicyKind k : {PolicyKind::kTroupe, PolicyKind::kBinpack, PolicyKind::kSpread}) {
    if (name == policyName(k)) return k;
  }
  return invalidArgument("unknown policy \"" + std::string(name) +
                         "\"; expected one of troupe, binpack, spread");
}

std::vector<std::string> validatePolicy(const PolicyConfig& c) {
  std::vector<std::string> errors;
  auto nonNegative = [&](double v, const char* field) {
    if (v < 0) errors.push_back(std::string("policy.weights.") + field + ": must be >= 0, got " + std::to_string(v));
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
