// Weighted, hierarchical dominant-resource fair share over GPU products (docs/queues.md has the
// formula with a worked example). Pure arithmetic: no clock, no locks.
//
// Resources are the GPU products, each with a capacity C_p (milli-GPUs on schedulable nodes).
// A queue's demand d_q,p is what it holds plus what its pending pods ask for, capped by its
// limit; a pending pod that accepts several products spreads its ask over them in proportion
// to their capacity. Among siblings sharing a parent's pool (the whole fleet at the top):
//   1. each child first gets min(guaranteed, demand) (a total guarantee is spread over the
//      child's demanded products in proportion to that demand);
//   2. the rest of the pool is filled progressively (DRF water-filling): a common level L
//      rises; child q, not yet satisfied, holds min(d_q, g_q + (w_q * L) * d_q / D_q), where
//      D_q = max_p d_q,p / C_p is its demand's dominant share (so each unsatisfied child's
//      dominant share grows in proportion to its weight); when a product runs out, the
//      children that need it stop growing and the others continue;
//   3. a parent's fair share is then split among its children the same way.
// A queue's fair share is the vector it ends with; its dominant share is max_p x_q,p / C_p.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "troupe/sched/queue/queue_spec.h"

namespace troupe::sched {

using ProductMilli = std::map<std::string, int64_t>;  // product -> milli-GPUs

struct QueueDemand {
  ProductMilli allocated;  // bound and reserved
  ProductMilli pending;    // pending pods' asks, spread over the products they accept
};

struct FairShare {
  ProductMilli share;       // the queue's fair share per product (milli-GPUs)
  int64_t total_milli = 0;  // sum over products
  double dominant = 0;      // max_p share_p / C_p; 0 when nothing is demanded
};

// Fair shares for every valid queue of `tree` (parents included: a parent's share is the pool
// its children split). `demand` is per leaf or parent queue (a parent's own pods count as a
// child of it); queues missing from it demand nothing. Products with zero capacity are ignored.
std::map<std::string, FairShare> computeFairShares(const QueueTree& tree, const ProductMilli& capacity,
                                                   const std::map<std::string, QueueDemand>& demand);

// Dominant share of an amount: max_p amount_p / capacity_p (0 for an empty amount).
double dominantShare(const ProductMilli& amount, const ProductMilli& capacity);

}  // namespace troupe::sched
