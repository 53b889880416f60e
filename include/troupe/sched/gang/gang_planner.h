// Planning a whole gang at once: where would all of its minimum members go, given what is
// free right now? Pure: it reads NodeStates and returns slots; the Scheduler turns the slots
// into held GPUs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

struct GangSlot {
  std::string node;
  std::vector<int> gpus;
  std::string member_uid;  // the pod steered here; empty until a member claims it
  int dra_gpus = 0;        // on a DRA-served node: GPUs held whose indices DRA chooses
  int gpuCount() const { return static_cast<int>(gpus.size()) + dra_gpus; }
};

struct GangPlanResult {
  std::vector<GangSlot> slots;  // empty when it does not fit
  bool never_fits = false;      // not even on empty matching nodes
  std::string reason;           // why not, with the numbers
};

// Places `members` pods like `req`. `nodes` are the candidates; cordoned nodes and nodes
// failing the static checks (model, memory, size) are skipped. `levels` are the network
// topology levels (label keys, widest first) that each node's info().topology_domains follow.
//
// With req.topology_preferred (else req.topology_required) set, the gang goes into one domain
// of that level if one can hold it now: the best-fitting one (fewest free GPUs, then fuller,
// then name), so larger domains stay whole for larger gangs. If none can, a wider level is
// tried, up to the required level (then it is not admitted) or the widest. Otherwise, and
// inside the chosen domain, members are packed top-down into the fewest domains: at each level
// (zones, blocks, racks, then nodes) the best-fitting domain that holds all that is left, else
// the one that takes the most members (fuller, then by name, among equals) and again for the
// rest. Nodes without a level's label are in no domain of that level: never chosen as "one
// domain", and packed after the labelled domains by the levels they have.
GangPlanResult planGang(const std::vector<const model::NodeState*>& nodes, const GpuRequest& req, int members,
                        const std::string& gang_key, const std::vector<std::string>& levels);

}  // namespace troupe::sched
