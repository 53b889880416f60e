// The filter of one pod on its own (or a member of an admitted gang) over candidate nodes, and
// narrowing that answer to the policy's best node (SchedulerConfig::narrow_to_best).
//
// Pure functions of what they are given: no lock of their own. The Scheduler calls them under
// its shared model lock, which keeps the nodes from changing meanwhile.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/cluster/node_index.h"
#include "troupe/sched/filter/filter_result.h"
#include "troupe/sched/policies/policy.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sched/request/request_mix.h"
#include "troupe/sched/score/score_memo.h"

namespace troupe::sched {

// The gang a node is kept free for (drained), or "" when none; empty when no gang drains.
using DrainOwner = std::function<std::string(const std::string& node)>;

// Checks each of `node_names` in `index` for `req`: passed (in order), failed (busy, or
// drained for a gang other than `own_gang`) or unresolvable (unknown node, never fits), each
// distinct misfit worded once per call (the model misfit once per GPU product) and every
// rejection counted in its category. With `passed_nodes`, also each passing node's state, in
// `passed` order.
FilterResult filterEachNode(const NodeIndex& index, const GpuRequest& req,
                            const std::vector<std::string>& node_names, const DrainOwner& drain_owner,
                            const std::string& own_gang = "",
                            std::vector<const model::NodeState*>* passed_nodes = nullptr);

// Keeps only the best of `out.passed` (`nodes`: their states, in order) as bestByValue ranks
// them against `mix`, and returns its index in `nodes`. `memo`: values remembered across
// calls, or nullptr to score every node afresh. `pressure`: scarce GPU models, taken off each
// value as the policy says (Policy::scarcityPenalty); nullptr = none. `whole`: the pressure on
// whole nodes, likewise (Policy::wholeNodePenalty). `out.passed` must not be empty.
int narrowToBest(const Policy& policy, const GpuRequest& req, const std::shared_ptr<const RequestMix>& mix,
                 ScoreMemo* memo, const std::vector<const model::NodeState*>& nodes, FilterResult& out,
                 const ModelPressure* pressure = nullptr, const WholeNodePressure* whole = nullptr);

}  // namespace troupe::sched
