// Filter stage 7 (filter_cycle.h): narrowing (SchedulerConfig::narrow_to_best). When more than
// one node passed, keeps only the policy's best (narrowToBest against the current request mix,
// with the scarce-model and whole-node pressures), in out.passed and passed_nodes alike. Under
// the model lock.
#pragma once

#include "troupe/sched/cluster/cluster_state.h"
#include "troupe/sched/filter/filter_cycle.h"
#include "troupe/sched/request/request_mix.h"
#include "troupe/sched/score/model_pressure.h"
#include "troupe/sched/score/whole_node_pressure.h"

namespace troupe::sched {

bool narrowStage(FilterCycle& cycle, const FilterParts& parts);

// Scarce GPU models now: the mix's constrained demand against the cluster's free GPUs per
// product (one pass over the nodes, only while some recent request names a model).
ModelPressure modelPressureOf(const ClusterState& cluster, const RequestMix& mix);
// The pressure on whole nodes now (one pass over the nodes, only while the mix asks for whole
// nodes).
WholeNodePressure wholeNodePressureOf(const ClusterState& cluster, const RequestMix& mix);

}  // namespace troupe::sched
