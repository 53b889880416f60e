#include "adapters/kube/queues/queue_sync.h"

#include <vector>

namespace troupe::kube {
QueueSink QueueSink::of(sched::Scheduler& scheduler) {
  return QueueSink{[&scheduler](sched::QueueTree tree) { scheduler.setQueues(std::move(tree)); },
                   [&scheduler](const std::string& ns, const std::string& queue) {
                     scheduler.setNamespaceQueue(ns, queue);
                   },
                   {}};
}

QueueSync::QueueSync(QueueSink sink, adapters::Logger& logger, std::string default_queue)
    : sink_(std::move(sink)), logger_(logger), default_queue_(std::move(default_queue)) {}

std::set<std::string> QueueSync::queueObjects() const {
  std::lock_guard lock(mu_);
  std::set<std::string> out;
  for (const auto& [name, rec] : queues_) out.insert(name);
  return out;
}

// ---- queues ------------------------------------------------------------------------------

void QueueSync::beginQueueList() {
  std::lock_guard lock(mu_);
  ++queue_generation_;
  listing_queues_ = true;
}

void QueueSync::endQueueList() {
  std::lock_guard lock(mu_);
  listing_queues_ = false;
  for (auto it = queues_.begin(); it != queues_.end();) {
    it = it->second.generation != queue_generation_ ? queues_.erase(it) : std::next(it);
  }
  if (!queues_listed_.exchange(true)) {
    logger_.info("Queue objects listed; they replace the config file's queue definitions",
                 {{"queues", std::to_string(queues_.size())}});
  }
  rebuildLocked();
}

void QueueSync::queueEvent(WatchEventType type, const Json& object) {
  const std::string name = nameOf(object);
  if (name.empty()) {
    logger_.warn("Queue without metadata.name skipped");
    return;
  }
  std::lock_guard lock(mu_);
  if (type == WatchEventType::kDeleted) {
    queues_.erase(name);
  } else {
    queues_[name] = QueueRecord{decodeQueue(object), queue_generation_};
  }
  if (!listing_queues_) rebuildLocked();
}

void QueueSync::membershipChanged(const std::string& why) {
  if (sink_.membership_changed) sink_.membership_changed(why);
}

void QueueSync::rebuildLocked() {
  std::vector<DecodedQueue> decoded;
  decoded.reserve(queues_.size());
  for (const auto& [name, rec] : queues_) decoded.push_back(rec.queue);
  sched::QueueTree tree = buildQueueTree(decoded, default_queue_);
  // Each refusal is logged once, when it first appears or changes.
  std::map<std::string, std::string> now = tree.invalid();
  for (const auto& [name, error] : now) {
    auto was = logged_.find(name);
    if (was == logged_.end() || was->second != error) {
      logger_.warn("queue is invalid; its pods are refused with this reason until it is fixed",
                   {{"queue", name}, {"error", error}});
    }
  }
  logged_ = std::move(now);
  std::set<std::string> names;
  for (const sched::QueueSpec& q : tree.queues()) names.insert(q.name);
  for (const auto& [name, error] : tree.invalid()) names.insert(name);
  const bool renamed = names != names_;
  names_ = std::move(names);
  logger_.debug("queues rebuilt", {{"valid", std::to_string(tree.queues().size())},
                                   {"invalid", std::to_string(tree.invalid().size())}});
  sink_.set_queues(std::move(tree));
  ++rebuilds_;
  if (renamed) membershipChanged("queues");
}

// ---- namespaces --------------------------------------------------------------------------

void QueueSync::beginNamespaceList() {
  std::lock_guard lock(mu_);
  ++namespace_generation_;
}

void QueueSync::endNamespaceList() {
  std::lock_guard lock(mu_);
  for (auto it = namespaces_.begin(); it != namespaces_.end();) {
    if (it->second.generation == namespace_generation_) {
      ++it;
      continue;
    }
    sink_.set_namespace_queue(it->first, "");  // gone while the watch was down
    membershipChanged("namespace-queue");
    it = namespaces_.erase(it);
  }
}

void QueueSync::namespaceEvent(WatchEventType type, const Json& object) {
  Result<NamespaceQueue> ns = decodeNamespace(object);
  if (!ns.isOk()) {
    logger_.warn("namespace skipped", {{"error", ns.status().message()}});
    return;
  }
  const std::string queue = type == WatchEventType::kDeleted ? std::string() : ns.value().queue;
  std::lock_guard lock(mu_);
  auto it = namespaces_.find(ns.value().ns);
  if (queue.empty()) {
    // Only namespaces that name a queue are kept; one that stops naming it is told so once.
    if (it == namespaces_.end()) return;
    namespaces_.erase(it);
    sink_.set_namespace_queue(ns.value().ns, "");
    membershipChanged("namespace-queue");
    return;
  }
  if (it != namespaces_.end() && it->second.queue == queue) {
    it->second.generation = namespace_generation_;
    return;
  }
  namespaces_[ns.value().ns] = NamespaceRecord{queue, namespace_generation_};
  sink_.set_namespace_queue(ns.value().ns, queue);
  membershipChanged("namespace-queue");
}

}  // namespace troupe::kube
