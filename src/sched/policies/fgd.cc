// fgd: the FGD paper's fragmentation gradient descent, as its artifact scores it: the integer
// score of how much the placement raises the node's expected fragmentation against the trace's
// typical pods (fragmentation.h).
#include "troupe/model/gpu_selection.h"
#include "troupe/sched/policies/policy_hooks.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {
namespace {

class FgdPolicy final : public Policy, public PolicyHooks {
 public:
  std::string_view name() const override { return "fgd"; }
  bool sharesNodeValues() const override { return true; }

  NodeScore score(const model::NodeState& node, const GpuRequest& req,
                  const ScoreContext& ctx) const override {
    NodeScore out;
    out.placement = paperPlacement(node, req);
    FragEval frag = evalFragmentation(node, req, ctx, model::indicesToMask(out.placement.gpus));
    if (req.shared()) out.placement.gpus = {frag.gpu};  // the share that fragments least
    out.value = frag.points;
    describePlacement(node.topology(), out.placement);
    return out;
  }
};

}  // namespace

PolicyEntry fgdPolicy() {
  return {"fgd", [](const PolicyArgs&) -> PolicyPtr { return std::make_shared<FgdPolicy>(); }};
}

}  // namespace troupe::sched
