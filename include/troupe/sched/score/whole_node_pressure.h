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
//
// A slot is room for the pod's CPU too. 8-GPU pods ask 64-120 cores, so a 96-core node whose 8
// free GPUs have 27 cores left beside them (CPU-only pods took the rest: the sweep's 3x
// CPU-only point) hosts none, and a 120-core pod fits only the 128-core nodes (at 50% multi-GPU
// small pods broke the last of those while 57 whole 96-core nodes were left). So the pressure
// has one level per CPU size the whole-node requests ask (RequestMix::wholeNodeDemand): level
// s counts those requests' share against slots_s, the slots with s cores left. A placement
// pays for the levels whose room it uses up on the node (the sum of their pressures), so a
// node that alone hosts the big-CPU pods costs more to break, and one with no room left for
// any costs nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/request/pod_request.h"
#include "troupe/sched/request/request_mix.h"

namespace troupe::sched {

class WholeNodePressure {
 public:
  struct Level {
    int64_t cpu_milli = 0;  // the CPU the pods of this level ask
    double value = 0;       // their pressure on the slots with that much CPU
  };

  // `demand`: RequestMix::wholeNodeDemand(); `free_milli`: the cluster's free milli-GPU;
  // `slots`: per level of `demand`, the sum of slotsOf(node, its cpu_milli) over the nodes.
  static WholeNodePressure compute(const std::vector<WholeNodeDemand>& demand, int64_t free_milli,
                                   const std::vector<int64_t>& slots);
  // One level: whole-node pods of `cpu_milli` CPU (0: GPUs only) and `share` of the request.
  static WholeNodePressure compute(double share, int64_t free_milli, int64_t slots, int64_t cpu_milli = 0);

  // The levels' pressures summed: what using up every level's room costs.
  double value() const;
  bool empty() const { return value() <= 0; }
  const std::vector<Level>& levels() const { return levels_; }
  // The summed pressure of the levels whose room placing `req` on `node` uses up; 0 if none.
  double usedUpBy(const model::NodeState& node, const GpuRequest& req) const;

  // How many whole-node pods `node` can take by its fully free GPUs and, with `cpu_milli` > 0
  // (each pod's CPU), its CPU left; 0 counts GPUs only.
  static int slotsOf(const model::NodeState& node, int64_t cpu_milli = 0);
  // How many of them placing `req` on `node` uses up: by the GPUs it takes and the CPU (a
  // CPU-only pod too). A share is counted on a partly used GPU when one has room for it (where
  // troupe puts it), else on a fully free one.
  static int slotsTaken(const model::NodeState& node, const GpuRequest& req, int64_t cpu_milli = 0);

 private:
  std::vector<Level> levels_;
};

// The cluster's free milli-GPU and its slots at each level of `demand`, added node by node (the
// live filter's and the queueing simulation's pass over their nodes); then the pressure.
class WholeNodeTally {
 public:
  explicit WholeNodeTally(const std::vector<WholeNodeDemand>& demand)
      : demand_(demand), slots_(demand.size(), 0) {}
  void add(const model::NodeState& node) {
    free_milli_ += node.freeMilliTotal();
    for (size_t i = 0; i < demand_.size(); ++i)
      slots_[i] += WholeNodePressure::slotsOf(node, demand_[i].cpu_milli);
  }
  WholeNodePressure pressure() const { return WholeNodePressure::compute(demand_, free_milli_, slots_); }

 private:
  const std::vector<WholeNodeDemand>& demand_;  // outlives the tally (the mix's)
  int64_t free_milli_ = 0;
  std::vector<int64_t> slots_;
};

}  // namespace troupe::sched
