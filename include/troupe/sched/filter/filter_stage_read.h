// Filter stage 1 (filter_cycle.h): reads the pod once per cycle. Writes the request (the one
// the pod's pending record was parsed from while the pod is unchanged, else parsed now), the
// gang (a native PodGroup's topology constraint narrowing the request's), whether Kueue placed
// the pod and whether it is filtered as a gang member. Ends the cycle for an invalid pod:
// every node unresolvable, category "invalid-pod".
#pragma once

#include "troupe/sched/filter/filter_cycle.h"

namespace troupe::sched {

bool readPodStage(FilterCycle& cycle, const FilterParts& parts);

}  // namespace troupe::sched
