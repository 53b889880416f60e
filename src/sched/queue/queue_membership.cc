#include "troupe/sched/queue/queue_membership.h"

#include "troupe/model/pod_contract.h"

namespace troupe::sched {
namespace {

// Why `name` (from `source`) is no queue pods can join, or "" when it is one.
std::string unusable(const std::string& name, const std::string& source, const QueueTree& tree) {
  if (tree.find(name)) return "";
  const std::string said = source + "=\"" + name + "\"";
  if (auto bad = tree.invalid().find(name); bad != tree.invalid().end()) {
    return said + " names a queue that is not used: " + bad->second;
  }
  std::string known;
  size_t listed = 0;
  for (const QueueSpec& q : tree.queues()) {
    if (listed == 8) {
      known += ", ...";
      break;
    }
    known += (listed++ ? ", " : "") + q.name;
  }
  return said + " names no queue: create Queue \"" + name + "\" or name an existing one (" + known + ")";
}

Result<QueueMembership> resolve(const std::string& name, const std::string& source, const QueueTree& tree) {
  if (tree.empty()) return QueueMembership{name, source};  // queueing off: nothing to check against
  if (std::string e = unusable(name, source, tree); !e.empty()) return invalidArgument(e);
  return QueueMembership{name, source};
}

}  // namespace

Result<QueueMembership> queueOf(const PodFacts& pod, const QueueTree& tree,
                                const std::string& namespace_default) {
  if (auto it = pod.annotations.find(kQueueKey); it != pod.annotations.end()) {
    return resolve(it->second, std::string("annotation ") + kQueueKey, tree);
  }
  if (auto it = pod.labels.find(kQueueKey); it != pod.labels.end()) {
    return resolve(it->second, std::string("label ") + kQueueKey, tree);
  }
  if (auto it = pod.labels.find(kKueueQueueName); it != pod.labels.end()) {
    return resolve(it->second, std::string("label ") + kKueueQueueName, tree);
  }
  if (!namespace_default.empty()) {
    return resolve(namespace_default, "namespace " + pod.ns + " annotation " + kNamespaceDefaultQueue, tree);
  }
  return resolve(tree.defaultQueue(), "cluster default queue", tree);
}

}  // namespace troupe::sched
