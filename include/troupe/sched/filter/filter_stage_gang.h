// Filter stage 4 (filter_cycle.h): a gang member's filter (cycle.in_gang; anyone else passes
// through). A gang not planned yet whose pods have a queue is first held back as a whole:
// the queue must admit all its minimum members, and a reclaim in flight keeps its nodes. Then
// the gang book answers (it may plan the gang, which changes the model); a member of an
// admitted gang is filtered like a pod on its own. Writes out and ends the cycle. Under the
// model lock held exclusively (cycle.completions set).
#pragma once

#include "troupe/sched/filter/filter_cycle.h"

namespace troupe::sched {

bool gangStage(FilterCycle& cycle, const FilterParts& parts);

}  // namespace troupe::sched
