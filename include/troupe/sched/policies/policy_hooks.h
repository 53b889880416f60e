// What the simulator and the score memo ask of a policy beyond policy.h, which is all a policy
// author must write. Optional: a policy that also derives from PolicyHooks overrides the hooks it
// needs; hooksOf() gives every other policy the defaults, which suit a deterministic policy whose
// value may read anything of the node. docs/extending.md lists when to override each.
#pragma once

#include <cstdint>

#include "troupe/model/node.h"
#include "troupe/sched/policies/policy.h"

namespace troupe::sched {

class PolicyHooks {
 public:
  virtual ~PolicyHooks() = default;

  // For the score memo (shared_node_values.h):
  // True when the value reads a node only through what SharedNodeValues keys it by (GPU
  // topology, count and use, held GPUs, product access, CPU classes of the mix): nodes in the
  // same such state may then share one computed value.
  virtual bool sharesNodeValues() const { return false; }
  // What else the value reads of a node beyond SharedNodeValues' key, as a class below 2^16
  // (0: nothing): nodes share a value only where this agrees too.
  virtual uint32_t shareClass(const model::NodeState& /*node*/, const GpuRequest& /*req*/,
                              const ScoreContext& /*context*/) const {
    return 0;
  }

  // For the simulator (sim/replay.cc, choose_node.h):
  // True when the simulator draws the node (and a shared GPU) from its random stream instead
  // of ranking by score.
  virtual bool drawsNode() const { return false; }
  // True when the simulator measures fragmentation against the live request window, as the
  // extender does, instead of the trace's fixed mix.
  virtual bool usesLiveMix() const { return false; }
};

// `policy`'s hooks when it derives from PolicyHooks, else the defaults.
const PolicyHooks& hooksOf(const Policy& policy);

}  // namespace troupe::sched
