// Policies by name: what the config's policy.name and simulate's --policy resolve through.
//
// A registry is a plain value: built, then only read. The built-in one (builtinPolicies) is a
// const object made on first use, so there is no mutable global; a test or an embedding
// program builds its own and adds policies to it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/sched/policies/policy.h"
#include "troupe/sched/policies/policy_args.h"

namespace troupe::sched {

struct PolicyEntry {
  std::string name;
  // Makes the policy from its arguments (PolicyArgs' member for it, if any). Never null.
  std::function<PolicyPtr(const PolicyArgs&)> make;
};

class PolicyRegistry {
 public:
  // Refuses an empty name, a name already registered and an entry without a factory.
  Status add(PolicyEntry entry);
  // The policy `name` made with `args`; an unknown name is an error listing the known ones.
  Result<PolicyPtr> create(std::string_view name, const PolicyArgs& args = {}) const;
  Result<PolicyPtr> create(const PolicyChoice& choice) const { return create(choice.name, choice.args); }
  // In registration order.
  std::vector<std::string> names() const;

 private:
  std::vector<PolicyEntry> entries_;
};

// troupe, fgd, best-fit, dot-product, gpu-packing, gpu-clustering, random, kube, binpack, spread.
const PolicyRegistry& builtinPolicies();

}  // namespace troupe::sched
