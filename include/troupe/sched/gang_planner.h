// Planning a whole gang at once: where would all of its minimum members go, given what is
// free right now? Pure: it reads NodeStates and returns slots; the Scheduler turns the slots
// into held GPUs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/pod_request.h"

namespace troupe::sched {

struct GangSlot {
  std::string node;
  std::vector<int> gpus;
  std::string member_uid;  // the pod steered here; empty until a member claims it
  bool bound = false;
};

struct GangPlanResult {
  std::vector<GangSlot> slots;  // empty when it does not fit
  bool never_fits = false;      // not even on empty matching nodes
  std::string reason;           // why not, with the numbers
};

// Places `members` pods like `req`, fewest nodes first (the nodes that take the most members),
// fuller nodes before emptier ones among equals, then by name. `nodes` are the candidates;
// cordoned nodes and nodes failing the static checks (model, memory, size) are skipped.
GangPlanResult planGang(const std::vector<const model::NodeState*>& nodes, const GpuRequest& req, int members,
                        const std::string& gang_key);

}  // namespace troupe::sched
