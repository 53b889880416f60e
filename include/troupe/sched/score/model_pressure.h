// How scarce each GPU model is for the requests that can run only on it.
//
// A request limited to some GPU models (the trace's gpu_spec, troupe.dev/gpu-model) fails once
// those models are full, while a request that takes any model could have gone elsewhere. So
// the troupe policy steers unconstrained requests away from the models that constrained demand
// will need. The pressure on a product p is the GPU request the constrained lists naming p are
// expected to make until the cluster is full, against the free capacity they can use:
//
//   pressure(p) = F * sum over lists L naming p of  share(L) / F(L)
//
// where share(L) is L's part of the recent GPU request (RequestMix::constrained()), F the free
// milli-GPU of the whole cluster (what will still arrive before it is full) and F(L) the free
// milli-GPU of the products L names (its demand spread over them as they have room). A pressure
// near or above 1 means the model will be short; 0 means no request needs it in particular.
// It changes as the cluster fills (free capacity moves), so callers recompute it from the
// current free capacity instead of memoising it with node scores.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/request/request_mix.h"

namespace troupe::sched {

class ModelPressure {
 public:
  // `free_by_product`: free milli-GPU of every GPU product in the cluster (all nodes).
  static ModelPressure compute(const RequestMix& mix,
                               const std::vector<std::pair<std::string, int64_t>>& free_by_product);

  // The pressure on `product` (case-insensitive), 0 for a product no list names.
  double of(std::string_view product) const;
  // True when no recent request names a GPU model: every pressure is 0.
  bool empty() const { return by_product_.empty(); }

 private:
  std::vector<std::pair<std::string, double>> by_product_;
};

// The free milli-GPU of each GPU product, added node by node (the live filter's and the queueing
// simulation's pass over their nodes): ModelPressure::compute's input. Nodes without GPUs add
// nothing.
class FreeGpuByProduct {
 public:
  void add(const model::NodeState& node);
  const std::vector<std::pair<std::string, int64_t>>& list() const { return free_; }

 private:
  std::vector<std::pair<std::string, int64_t>> free_;
};

}  // namespace troupe::sched
