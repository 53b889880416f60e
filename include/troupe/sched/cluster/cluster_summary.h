// What the cluster looks like right now, for metrics and diagnostics: GPUs per product and per
// node, gangs by state, pending pods and the narrowing memo's counts. Scheduler::summary fills
// it from its parts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::sched {

struct ClusterSummary {
  struct Row {
    std::string product;
    int nodes = 0;
    int gpus = 0;
    int64_t used_milli = 0;
    int shared_gpus = 0;
    int whole_free = 0;
    int nodes_with_free_8 = 0;  // nodes that can still take an 8-GPU pod
  };
  std::vector<Row> by_product;
  // One row per GPU node, sorted by name (per-node gauges: bounded by the cluster's size);
  // empty, with node_rows_omitted set, when the GPU nodes outnumber summary()'s max_node_rows.
  struct NodeRow {
    std::string node;
    std::string product;
    int gpus = 0;
    int64_t used_milli = 0;
    int shared_gpus = 0;
  };
  std::vector<NodeRow> by_node;
  bool node_rows_omitted = false;
  struct Gangs {
    int waiting = 0;   // seen, no plan (does not fit, or waits its turn)
    int planned = 0;   // GPUs held, members steered, not all bound yet
    int admitted = 0;  // every minimum member bound
    int held_gpus = 0;
    int draining_nodes = 0;
  } gangs;
  int pods = 0;  // holding GPUs (CPU-only pods the model counts are left out)
  int pending = 0;
  // GPUs that are free but sit on nodes with fewer free GPUs than the common request sizes
  // (per product: free GPUs that cannot serve the largest size seen among 1, 2, 4, 8).
  int fragmented_gpus = 0;
  // narrowTo: best, since the start: node values reused from an earlier filter call
  // (ScoreMemo) and values computed.
  uint64_t scores_remembered = 0;
  uint64_t scores_computed = 0;
};

}  // namespace troupe::sched
