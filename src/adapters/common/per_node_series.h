// Whether /metrics carries the series labelled with a node name (troupe_node_gpus: three per
// GPU node).
//
// They grow with the cluster: at 10,000 GPU nodes 30,000 series and a 2.5 MB body in every
// scrape of every replica, and as many series in each Prometheus that scrapes it. Troupe
// writes them cheaply (node_gpus_text.h; ~7 ms a scrape at 10,000 nodes), so the limit is for
// the scraper and for people: a per-node table of thousands of rows is not read, and fleet
// questions are answered by the per-product series, which stay in every mode with the other
// cluster-wide aggregates (gangs, pods, fragmentation).
//
// auto (the default) exports them while the model has fewer GPU nodes than auto_off_at
// (1,000; metrics.perNodeSeriesOffAt): a per-node table is still readable there and the body
// stays near 250 KB; at or above it they are removed at the next scrape, and they come back
// when the cluster shrinks below it. There is no hysteresis: a cluster hovering at the threshold flips with
// it.
#pragma once

#include <cstddef>
#include <limits>

namespace troupe::adapters {

struct PerNodeSeries {
  enum class Mode { kAuto, kOn, kOff };
  static constexpr size_t kDefaultAutoOffAt = 1000;

  Mode mode = Mode::kAuto;
  size_t auto_off_at = kDefaultAutoOffAt;  // auto: off at this many GPU nodes and more

  bool exportedFor(size_t gpu_nodes) const {
    switch (mode) {
      case Mode::kOn: return true;
      case Mode::kOff: return false;
      case Mode::kAuto: break;
    }
    return gpu_nodes < auto_off_at;
  }
  const char* modeName() const {
    switch (mode) {
      case Mode::kOn: return "on";
      case Mode::kOff: return "off";
      case Mode::kAuto: break;
    }
    return "auto";
  }
  // The most per-node rows a scrape can use (Scheduler::summary's max_node_rows).
  size_t maxNodeRows() const {
    switch (mode) {
      case Mode::kOn: return std::numeric_limits<size_t>::max();
      case Mode::kOff: return 0;
      case Mode::kAuto: break;
    }
    return auto_off_at == 0 ? 0 : auto_off_at - 1;
  }
};

}  // namespace troupe::adapters
