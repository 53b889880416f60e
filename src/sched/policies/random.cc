// random: the FGD paper's Random. The simulator draws a fitting node, and a GPU for a share,
// from its seeded stream (drawsNode). Live there is no random stream: a node ranks by a hash of
// its name and load, which varies across nodes and pods without hidden state.
#include "troupe/sched/policies/policy_hooks.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/score/node_scoring.h"

namespace troupe::sched {
namespace {

uint64_t mixHash(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  return h * 0xBF58476D1CE4E5B9ULL;
}

class RandomPolicy final : public Policy, public PolicyHooks {
 public:
  std::string_view name() const override { return "random"; }
  bool drawsNode() const override { return true; }

  // Every node alike: the choice is the caller's draw.
  NodeScore score(const model::NodeState& node, const GpuRequest& req, const ScoreContext&) const override {
    return paperScore(node, req, 0);
  }

  double unitScore(const model::NodeState& node, const GpuRequest&, const Placement&,
                   const ScoreContext&) const override {
    return hashOf(node);
  }

  double rankValue(const model::NodeState& node, const GpuRequest&, const ScoreContext&) const override {
    return hashOf(node);
  }

 private:
  // 0..1 from the node's name, GPU use and pod count.
  static double hashOf(const model::NodeState& node) {
    uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : node.info().name) h = mixHash(h, c);
    h = mixHash(h, static_cast<uint64_t>(node.usedMilliTotal()));
    h = mixHash(h, static_cast<uint64_t>(node.podCount()));
    return static_cast<double>(h >> 11) / 9007199254740992.0;
  }
};

}  // namespace

PolicyEntry randomPolicy() {
  return {"random", [](const PolicyArgs&) -> PolicyPtr { return std::make_shared<RandomPolicy>(); }};
}

}  // namespace troupe::sched
