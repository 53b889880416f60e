// Queues: who gets contested GPUs. A queue (the cluster-scoped Queue object of troupe.dev/v1alpha1,
// or `queues:` in the standalone config) has a weight, a guaranteed share, a limit and a parent;
// pods join one by label or annotation (queue_membership.h). GPU amounts are in milli-GPUs
// (1000 = one whole GPU) so GPU-sharing pods count for their share.
//
// A QueueTree is the validated set: a forest of queues. A queue that fails validation is kept out
// of the tree with its error, and its pods see that error as their reason (never a silent default).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "troupe/model/pod_contract.h"

namespace troupe::sched {

// The queue pods join when neither they nor their namespace name one. It exists implicitly
// (weight 1, nothing guaranteed, no limit, preemptible) unless it is defined.
inline constexpr const char* kDefaultQueueName = "default";

// GPU amounts, in milli-GPUs: in all (every product together) and per GPU product (the nodes'
// nvidia.com/gpu.product label value; "" is the product of nodes without the label).
struct GpuQuota {
  std::optional<int64_t> milli;                  // all products together; nullopt = not set
  std::map<std::string, int64_t> product_milli;  // per product; a product not named = not set

  bool empty() const { return !milli && product_milli.empty(); }
  bool operator==(const GpuQuota&) const = default;
};

struct QueueSpec {
  std::string name;
  std::string parent;       // "" = a top-level queue
  double weight = 1;        // > 0: the share of contested GPUs among siblings
  GpuQuota guaranteed;      // unset = 0: GPUs this queue gets back by reclaim when it has demand
  GpuQuota limit;           // unset = no limit: the most this queue (with its children) may hold
  bool preemptible = true;  // whether its pods above the guaranteed share may be reclaimed

  bool operator==(const QueueSpec&) const = default;
};

// A validated forest of queues. build() checks, per queue: the name is a DNS-1123 subdomain and
// unique; the parent exists and is valid and there is no cycle; the weight is positive and
// finite; every amount is >= 0; guaranteed <= limit (in all and per product); the children's
// guarantees add up to no more than the parent's where the parent sets one. A queue that fails
// (or whose parent fails) is left out, with its error in invalid().
class QueueTree {
 public:
  QueueTree() = default;
  // `default_queue` is the cluster default (kDefaultQueueName unless configured); it is added
  // as an implicit top-level queue when `specs` is not empty and does not define it.
  static QueueTree build(std::vector<QueueSpec> specs, std::string default_queue = kDefaultQueueName);
  // As above, with queues an adapter could not decode (name -> the adapter's error, which
  // names the object, the field and the fix): each is kept invalid with that error, and its
  // children are invalid as children of an invalid parent.
  static QueueTree build(std::vector<QueueSpec> specs, std::map<std::string, std::string> undecodable,
                         std::string default_queue);

  // No queues at all: queueing is off and every pod is admitted as before.
  bool empty() const { return queues_.empty() && invalid_.empty(); }
  const QueueSpec* find(const std::string& name) const;
  // name -> why the queue is not used (names the field and the fix).
  const std::map<std::string, std::string>& invalid() const { return invalid_; }
  const std::string& defaultQueue() const { return default_queue_; }
  // Valid queues in a parent-before-child order (names sorted within a level).
  const std::vector<QueueSpec>& queues() const { return queues_; }
  std::vector<std::string> children(const std::string& name) const;  // "" = the top level
  // The queue itself and then its ancestors, nearest first; empty for an unknown queue.
  std::vector<std::string> lineage(const std::string& name) const;
  bool isLeaf(const std::string& name) const { return children(name).empty(); }

 private:
  std::vector<QueueSpec> queues_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::vector<std::string>> children_;  // parent ("" = top) -> sorted names
  std::map<std::string, std::string> invalid_;
  std::string default_queue_ = kDefaultQueueName;
};

}  // namespace troupe::sched
