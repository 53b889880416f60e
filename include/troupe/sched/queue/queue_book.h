// Queue accounting and admission: what each queue holds and asks for, its fair share
// (fair_share.h), and whether one more pod of a queue may take GPUs now. One part of the
// Scheduler (scheduler-core.md); it has its own lock and never calls out.
//
// Admission of `milli` more GPUs for queue Q on a node of product P (filter asks per product):
//   1. limit: Q and each ancestor stay within their limit, in all and for P; else the reason
//      names the queue, its usage and its limit ("queue team-a is at its limit: it holds 16 of
//      16 GPUs; ...");
//   2. fair share: when Q's GPUs with the pod (all products together) would exceed its fair
//      share, and some other queue is waiting (its first pending pod fits now, accepts P and
//      keeps that queue within its own fair share and limits: refresh()), Q waits, and the
//      reason names both queues with their usage and fair share.
// Within a queue the order is kube-scheduler's (PriorityClass, then arrival) and the gang
// starvation drain (gang_book.h) keeps backfill from delaying a reserved gang.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "troupe/common/status.h"
#include "troupe/sched/queue/fair_share.h"
#include "troupe/sched/queue/queue_membership.h"
#include "troupe/sched/queue/queue_spec.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

using QueueClock = std::chrono::steady_clock;

// A GPU pod as queue accounting sees it.
struct QueuedPod {
  std::string uid;
  std::string key;  // namespace/name, for messages
  std::string queue;
  std::string gang;                 // its gang's key; "" = on its own
  int64_t milli = 0;                // its whole ask: gpus x milli per GPU
  std::vector<std::string> models;  // products it accepts while pending; empty = any
  std::string node;                 // "" = pending
  std::string product;              // bound: its node's product
  int64_t priority = 0;
  QueueClock::time_point since{};  // pending: first seen; bound: when it started (minimum runtime)

  bool bound() const { return !node.empty(); }
};

// One queue as metrics, the Queue object's status and `kubectl describe queue` show it.
struct QueueStatus {
  QueueSpec spec;
  ProductMilli allocated;  // bound and reserved, this queue and its children
  int64_t allocated_milli = 0;
  ProductMilli pending;  // pending asks, spread over the products they accept
  int64_t pending_milli = 0;
  int pending_pods = 0;
  int running_pods = 0;
  FairShare fair_share;
  double dominant_share = 0;      // of what it holds
  bool below_guaranteed = false;  // holds less than guaranteed and has pending pods
  bool above_fair_share = false;
  bool pending_fits = false;                  // some pending pod fits now (as of the last refresh)
  std::map<std::string, uint64_t> evictions;  // by reason, since the start
  std::string explanation;                    // how the numbers come about, one paragraph
  std::string invalid;                        // non-empty: the queue is not used, and why
};

class QueueBook {
 public:
  QueueBook() = default;
  QueueBook(const QueueBook&) = delete;
  QueueBook& operator=(const QueueBook&) = delete;

  // Replaces the queues (pods keep their membership by name; a pod whose queue is gone is
  // re-resolved at its next notePod). An empty tree turns queueing off.
  void setQueues(QueueTree tree);
  // A Namespace's troupe.dev/default-queue ("" removes it).
  void setNamespaceDefault(const std::string& ns, const std::string& queue);
  bool enabled() const;
  // The pod's queue (queue_membership.h) with this book's queues and namespace defaults.
  Result<QueueMembership> membership(const PodFacts& pod) const;

  // Adds or replaces a pod (pending or bound); a pod that holds nothing and asks for nothing
  // (milli 0) is removed.
  void upsertPod(QueuedPod pod);
  void removePod(const std::string& uid);
  std::optional<QueuedPod> pod(const std::string& uid) const;
  std::vector<QueuedPod> pods() const;

  // Recomputes the fair shares from the capacity per product and asks `fits` (at most once per
  // distinct shape per queue, pending pods first in priority, then arrival order) which queues
  // have a pending pod that fits now. Called by the Scheduler's tick (every queue_refresh, 200 ms).
  void refresh(const ProductMilli& capacity, const std::function<bool(const QueuedPod&)>& fits);

  // nullopt: `queue` may take `milli` more on a node of `product`; else the reason. `gang`:
  // the asking gang's key, whose own held GPUs are not counted twice.
  std::optional<std::string> admit(const std::string& queue, int64_t milli, const std::string& product,
                                   const std::string& gang = "") const;

  // The limit part of admit() alone: nullopt when `queue` and its ancestors stay within their
  // limits with `milli` more on `product` (preempt asks this of the preemptor's queue).
  std::optional<std::string> limitReason(const std::string& queue, int64_t milli, const std::string& product,
                                         const std::string& gang = "") const;
  // Why evicting these pods (bound ones in the book; others are ignored) is not allowed: one
  // is in a queue that is not preemptible, or the eviction takes its queue (or an ancestor)
  // below its guaranteed GPUs, in all or of a product. nullopt when it is allowed.
  std::optional<std::string> evictionVeto(const std::vector<std::string>& uids) const;
  // A pod of the book now holds GPUs on `node` (reserve): bound since `since`. No-op for a pod
  // the book does not know.
  void markBound(const std::string& uid, const std::string& node, const std::string& product,
                 QueueClock::time_point since);

  void countEviction(const std::string& queue, const std::string& reason);
  std::vector<QueueStatus> statuses() const;  // every queue, valid and invalid, sorted by name

 private:
  // Adds (sign 1) or takes out (-1) a bound pod's GPUs in its queue and every ancestor.
  void accountLocked(const QueuedPod& pod, int sign);
  void rebuildHeldLocked();
  // Each queue's own demand (its pods, not its children's), pending asks spread over products.
  std::map<std::string, QueueDemand> demandLocked() const;
  void recomputeFairLocked();
  std::optional<std::string> limitLocked(const std::string& queue, int64_t ask, const std::string& product,
                                         const std::string& gang) const;
  int64_t askLocked(int64_t milli, const std::string& gang) const;
  // Which queues are below their fair share of a product with pending pods that fit and accept it.
  void recomputeWaitingLocked();
  int64_t heldLocked(const std::string& queue, const std::string& product) const;
  int64_t heldTotalLocked(const std::string& queue) const;
  int64_t shareLocked(const std::string& queue, const std::string& product) const;
  int64_t shareTotalLocked(const std::string& queue) const;

  // Read without the lock: with queueing off, filter pays for one atomic load and no more.
  std::atomic<bool> enabled_{false};
  mutable std::mutex mu_;
  QueueTree tree_;
  std::map<std::string, std::string> namespace_defaults_;
  std::unordered_map<std::string, QueuedPod> pods_;
  ProductMilli capacity_;
  std::map<std::string, FairShare> fair_;
  std::map<std::string, bool> pending_fits_;
  // Per queue, its first pending pod (in its order) that fits now.
  std::map<std::string, QueuedPod> fitting_ask_;
  std::map<std::string, std::map<std::string, uint64_t>> evictions_;
  // Bound GPUs of each queue with its children: per product and in all; and of each gang.
  std::map<std::string, ProductMilli> held_;
  std::map<std::string, int64_t> held_total_;
  std::map<std::string, int64_t> gang_held_;
  // Product -> the queues waiting for it (refresh()): below their fair share of it, with a
  // pending pod that fits now, accepts it and would be admitted (it keeps the queue and its
  // ancestors within their share and limits). Only such a queue holds others back, so the one
  // it holds back never holds it back in turn. And how many of those are in each
  // queue's subtree, so admission knows in O(depth) whether someone outside is waiting.
  std::map<std::string, std::vector<std::string>> waiting_;
  std::map<std::string, std::map<std::string, int>> waiting_below_;
};

}  // namespace troupe::sched
