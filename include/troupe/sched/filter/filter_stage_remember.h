// Filter stage 2 (filter_cycle.h): records the pod as pending (PendingPods::remember) with the
// request and gang readPodStage wrote, and writes the record's seq. Ends the cycle for a pod
// gone for good (a tombstone: kube-scheduler's late call after the deletion). A pod seen for
// the first time joins the request mix, once per uid however often it is retried.
#pragma once

#include "troupe/sched/filter/filter_cycle.h"

namespace troupe::sched {

bool rememberPodStage(FilterCycle& cycle, const FilterParts& parts);

}  // namespace troupe::sched
