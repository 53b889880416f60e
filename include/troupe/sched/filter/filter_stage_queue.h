// Filter stage 3 (filter_cycle.h): resolves the pod's queue once per cycle (queue_book.h) and
// writes it; the pending record keeps it (recordCycle), so later verbs of the cycle read it.
// Ends the cycle for an invalid queue (every node unresolvable, category "queue"). In
// standalone mode, with no watch, this is how pending demand reaches the queue book. A pod
// that wants no GPUs, or any pod while queueing is off, has no queue.
#pragma once

#include <string>

#include "troupe/sched/filter/filter_cycle.h"

namespace troupe::sched {

bool queueStage(FilterCycle& cycle, const FilterParts& parts);

// The pod as the queue book keeps it (pending unless the model has its GPUs).
QueuedPod queuedPod(const PodFacts& pod, const GpuRequest& req, const std::string& queue,
                    const std::string& gang, QueueClock::time_point since);

}  // namespace troupe::sched
