#include "troupe/sched/policies/policy.h"

#include <algorithm>

#include "troupe/sched/policies/policy_hooks.h"
#include "troupe/sched/policies/policy_registry.h"

namespace troupe::sched {

double Policy::unitScore(const model::NodeState& node, const GpuRequest& req, const Placement& /*placement*/,
                         const ScoreContext& context) const {
  return std::clamp(score(node, req, context).value / 100.0, 0.0, 1.0);
}

double Policy::rankValue(const model::NodeState& node, const GpuRequest& req,
                         const ScoreContext& context) const {
  return score(node, req, context).value;
}

double Policy::scarcityPenalty(const model::NodeState& /*node*/, const GpuRequest& /*req*/,
                               const ModelPressure& /*pressure*/) const {
  return 0.0;
}

double Policy::wholeNodePenalty(const model::NodeState& /*node*/, const GpuRequest& /*req*/,
                                const WholeNodePressure& /*pressure*/) const {
  return 0.0;
}

const PolicyHooks& hooksOf(const Policy& policy) {
  static const PolicyHooks kDefaults;  // immutable
  const auto* own = dynamic_cast<const PolicyHooks*>(&policy);
  return own != nullptr ? *own : kDefaults;
}

// The built-in troupe always exists with default arguments, so value() cannot fail here.
PolicyConfig::PolicyConfig() : policy_(builtinPolicies().create("troupe").value()) {}

PolicyConfig::PolicyConfig(PolicyPtr policy) : policy_(std::move(policy)) {
  if (!policy_) *this = PolicyConfig();
}

NodeScore scoreNode(const PolicyConfig& config, const model::NodeState& node, const GpuRequest& req,
                    const ScoreContext& context) {
  return config->score(node, req, context);
}

}  // namespace troupe::sched
