// Keeps the core's queues in step with the cluster: the Queue objects (troupe.dev/v1alpha1)
// become the QueueTree (Scheduler::setQueues) and the Namespaces' troupe.dev/default-queue
// annotations become Scheduler::setNamespaceQueue calls.
//
// The tree is rebuilt from every Queue object on each change (a full list is applied once, at
// its end), so a Queue that does not decode, or that the tree refuses, is an invalid queue with
// its error and the others keep working. Until the first list of Queues succeeds (the CRD may
// not be installed) the queues stay as the config file's `queues.definitions` made them; once
// listed, the Queue objects replace them, an empty list included.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "adapters/common/logger.h"
#include "adapters/kube/queues/queues.h"
#include "adapters/kube/watch/watch_handler.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::kube {

// Where the queues go: the Scheduler, or a test's recorder.
struct QueueSink {
  std::function<void(sched::QueueTree)> set_queues;
  std::function<void(const std::string& ns, const std::string& queue)> set_namespace_queue;
  // Pods may now belong to other queues (queues appeared or went, a namespace's default
  // changed): the core re-resolves a pod's queue only when it sees the pod again, so the
  // runtime lists the pods again. Called under QueueSync's lock; it must not call back. `why`
  // is "queues" or "namespace-queue" (the pod watch's restart reason in the metrics).
  std::function<void(const std::string& why)> membership_changed;
  static QueueSink of(sched::Scheduler& scheduler);
};

class QueueSync {
 public:
  // `default_queue`: the cluster default queue (queues.default of the config).
  QueueSync(QueueSink sink, adapters::Logger& logger, std::string default_queue);
  QueueSync(const QueueSync&) = delete;
  QueueSync& operator=(const QueueSync&) = delete;

  WatchHandler& queueHandler() { return queue_handler_; }
  WatchHandler& namespaceHandler() { return namespace_handler_; }

  // The names of the Queue objects now (their status is Troupe's to write).
  std::set<std::string> queueObjects() const;
  bool queuesListed() const { return queues_listed_.load(); }
  uint64_t rebuilds() const { return rebuilds_.load(); }

 private:
  using Feed = MemberFeed<QueueSync>;

  void beginQueueList();
  void endQueueList();
  void queueEvent(WatchEventType type, const Json& object);
  void beginNamespaceList();
  void endNamespaceList();
  void namespaceEvent(WatchEventType type, const Json& object);
  // Builds the tree from queues_ and hands it to the core; caller holds mu_.
  void rebuildLocked();
  void membershipChanged(const std::string& why);

  QueueSink sink_;
  adapters::Logger& logger_;
  const std::string default_queue_;
  Feed queue_handler_{*this, &QueueSync::beginQueueList, &QueueSync::endQueueList, &QueueSync::queueEvent};
  Feed namespace_handler_{*this, &QueueSync::beginNamespaceList, &QueueSync::endNamespaceList,
                          &QueueSync::namespaceEvent};

  struct QueueRecord {
    DecodedQueue queue;
    uint32_t generation = 0;
  };
  struct NamespaceRecord {
    std::string queue;
    uint32_t generation = 0;
  };
  mutable std::mutex mu_;  // guards everything below
  std::map<std::string, QueueRecord> queues_;
  std::map<std::string, std::string> logged_;  // queue -> the error last logged for it
  std::set<std::string> names_;                // every queue of the last tree, valid or not
  bool listing_queues_ = false;
  uint32_t queue_generation_ = 0;
  std::map<std::string, NamespaceRecord> namespaces_;  // only those with a default queue
  uint32_t namespace_generation_ = 0;

  std::atomic<bool> queues_listed_{false};
  std::atomic<uint64_t> rebuilds_{0};
};

}  // namespace troupe::kube
