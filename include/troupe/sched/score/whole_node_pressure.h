// How much the recent requests still ask for whole nodes, against the whole nodes left.
//
// An 8-GPU pod (a training job that takes a whole node of the common 8-GPU machines) fits only
// on a node with 8 GPUs fully free. Scores that look at one node at a time (FGD's fragmentation,
// weighted by how often each request comes) barely count it: such pods are under 1% of the
// requests, though they carry several % of the GPU request. So small pods break whole nodes
// while others stay half empty, and the big jobs find none (FGD trace: troupe turned away 3.5x
// as many 8-GPU pods as FGD). The pressure on whole nodes is, as for scarce GPU models
// (model_pressure.h), the GPU request whole-node pods are expected to make until the cluster is
// full, against the free capacity they can use:
//
//   pressure = share * F / (8000 * slots)
//
// share: whole-node requests' part of the recent GPU request (RequestMix::wholeNodeShare), F
// the free milli-GPU of the cluster, slots how many 8-GPU pods the nodes can still take by
// their fully free GPUs. Near 0 while whole nodes abound or no one asks for them; it grows as
// the whole nodes run out. Like the model pressure it moves with every placement, so it is
// never memoised with node scores.
#pragma once

#include <cstdint>

#include "troupe/model/node.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sched/request/request_mix.h"

namespace troupe::sched {

class WholeNodePressure {
 public:
  // `share`: RequestMix::wholeNodeShare(); `free_milli`: the cluster's free milli-GPU;
  // `slots`: the sum of slotsOf over its nodes.
  static WholeNodePressure compute(double share, int64_t free_milli, int64_t slots);

  double value() const { return value_; }
  bool empty() const { return value_ <= 0; }

  // How many whole-node pods `node` can take by its fully free GPUs.
  static int slotsOf(const model::NodeState& node);
  // How many of them placing `req` on `node` uses up. A share is counted on a partly used GPU
  // when one has room for it (where troupe puts it), else on a fully free one.
  static int slotsTaken(const model::NodeState& node, const GpuRequest& req);

 private:
  double value_ = 0;
};

}  // namespace troupe::sched
