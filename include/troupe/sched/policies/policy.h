// A scoring policy: how good placing a pod on a node is, and which GPUs it takes there.
//
// Every policy is one class in its own file under src/sched/policies/, registered by name in
// builtin_policies.cc (policy_registry.h; docs/extending.md walks through adding one). The
// simulator and the live extender ask the same questions of it:
//   score       value and placement; the simulator and the narrowing rank nodes by the value,
//               highest first, ties as tieBreak() says (choose_node.h)
//   unitScore   0..1 for the placement the extender already chose (prioritize)
//   rankValue   what the live narrowing ranks by (score().value unless the policy draws)
// What only the score memo and the simulator ask (sharing values between nodes, drawing the node,
// the live mix) is apart, in policy_hooks.h: optional, with defaults.
//
// troupe (default): fragmentation first, measured against the mix of requests seen recently
//   (FGD's idea, on the live mix), then topology and packing; its weights are its arguments
//   (TroupeArgs). fgd, best-fit, dot-product, gpu-packing, gpu-clustering, random: the FGD
//   paper's policies, as its artifact scores them. kube: the stock kube-scheduler's resource
//   scoring. binpack: the fullest node wins. spread: the emptiest node wins.
#pragma once

#include <memory>
#include <string_view>

#include "troupe/model/node.h"
#include "troupe/sched/request/request_mix.h"
#include "troupe/sched/score/fragmentation.h"
#include "troupe/sched/score/model_pressure.h"
#include "troupe/sched/score/placement.h"
#include "troupe/sched/score/whole_node_pressure.h"

namespace troupe::sched {

// What a policy may consult beyond the node and the pod.
struct ScoreContext {
  const RequestMix* mix = nullptr;      // fgd, troupe: the request mix; nullptr = defaults()
  FragmentationCache* cache = nullptr;  // memo of F for `mix`; optional, not thread-safe
};

struct NodeScore {
  double value = 0;     // higher wins; the FGD paper's policies give whole numbers
  Placement placement;  // the GPUs this policy takes on the node
};

// How a policy breaks ties between equally scored nodes: a fixed node order (the FGD artifact's
// patched kube-scheduler, and Troupe), or at random (the stock kube-scheduler).
enum class TieBreak { kNodeOrder, kRandom };

// Implementations are immutable after construction: one instance serves concurrent filter calls.
class Policy {
 public:
  virtual ~Policy() = default;

  // The name the config, --policy and reports use.
  virtual std::string_view name() const = 0;

  // The pod on a node that passed findMisfit.
  virtual NodeScore score(const model::NodeState& node, const GpuRequest& req,
                          const ScoreContext& context) const = 0;

  // 0..1 for `placement` (the extender's own GPU choice on the node). By default score()'s
  // value on the FGD paper's 0..100 scale.
  virtual double unitScore(const model::NodeState& node, const GpuRequest& req, const Placement& placement,
                           const ScoreContext& context) const;

  // What the live narrowing ranks a fitting node by. By default score()'s value; a policy that
  // draws its node (drawsNode) has no random stream live and ranks by something else.
  virtual double rankValue(const model::NodeState& node, const GpuRequest& req,
                           const ScoreContext& context) const;

  // What ranking takes off score().value on `node` while GPU models are scarce
  // (model_pressure.h), in the value's points (the 0..100 scale): the narrowing subtracts it
  // from the value, prioritize a hundredth of it from unitScore. Apart from the value because
  // the pressure moves with every placement and values are memoised per node state. 0 by
  // default: the FGD paper's policies ignore it.
  virtual double scarcityPenalty(const model::NodeState& node, const GpuRequest& req,
                                 const ModelPressure& pressure) const;

  // What ranking takes off score().value on `node` for using up room an 8-GPU pod needs while
  // the mix still asks for whole nodes (whole_node_pressure.h), in points as scarcityPenalty
  // and applied the same way, for the same reason. 0 by default.
  virtual double wholeNodePenalty(const model::NodeState& node, const GpuRequest& req,
                                  const WholeNodePressure& pressure) const;

  virtual TieBreak tieBreak() const { return TieBreak::kNodeOrder; }
};

using PolicyPtr = std::shared_ptr<const Policy>;

// The policy a Scheduler or a replay uses; never empty. Default: troupe with its default
// arguments.
class PolicyConfig {
 public:
  PolicyConfig();
  PolicyConfig(PolicyPtr policy);  // NOLINT: implicit, a resolved policy is a config

  const Policy& operator*() const { return *policy_; }
  const Policy* operator->() const { return policy_.get(); }
  std::string_view name() const { return policy_->name(); }

 private:
  PolicyPtr policy_;
};

// config.policy->score(...): the GPUs and value the configured policy gives the pod on `node`.
NodeScore scoreNode(const PolicyConfig& config, const model::NodeState& node, const GpuRequest& req,
                    const ScoreContext& context);

}  // namespace troupe::sched
