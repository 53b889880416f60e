// Filter stage 6 (filter_cycle.h): queue admission and the reclaim hold. Moves the passed nodes
// whose GPU product the pod's queue may not take the pod's GPUs of now (category "queue"), then
// those a reclaim in flight keeps for another queue (category "reclaim"), into failed. Reads the
// queue queueStage wrote; a pod without queue, or one Kueue placed (Kueue's quota admitted it
// already), passes untouched. Under the model lock.
#pragma once

#include <string>
#include <vector>

#include "troupe/sched/filter/filter_cycle.h"

namespace troupe::sched {

bool holdStage(FilterCycle& cycle, const FilterParts& parts);

// Moves the passed nodes whose product `queue` may not take `milli` more of now into failed,
// with the book's reason. `passed_nodes`, when given, is kept in step with out.passed.
void holdBack(const FilterParts& parts, const std::string& queue, int64_t milli, const std::string& gang,
              FilterResult& out, std::vector<const model::NodeState*>* passed_nodes);
// Moves the passed nodes that a reclaim in flight keeps for another queue into failed.
void holdForReclaim(const FilterParts& parts, const std::string& queue, FilterResult& out,
                    std::vector<const model::NodeState*>* passed_nodes);

}  // namespace troupe::sched
