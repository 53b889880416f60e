// troupe_node_gpus, the per-node series, in the text exposition format (version 0.0.4),
// written straight from Scheduler::summary's node rows.
//
// Through prometheus-cpp's registry the 30,000 series of a 10,000-node cluster cost a gauge
// and a label map each, copied again into a MetricFamily at every Collect and formatted
// through an ostream: hundreds of milliseconds a scrape. One pass over rows that are already
// sorted costs a few.
#pragma once

#include <string>
#include <vector>

#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::metrics {

// HELP, TYPE and three series per row (state total, allocated, shared), appended to `out`;
// nothing when there are no rows. Label values are escaped as the format requires.
void appendNodeGpus(const std::vector<sched::ClusterSummary::NodeRow>& rows, std::string& out);

}  // namespace troupe::metrics
