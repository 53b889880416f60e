// Which queue a pod belongs to, in this order (the first one present wins):
//   1. troupe.dev/queue (annotation, else label)
//   2. kueue.x-k8s.io/queue-name (label): the Troupe queue of the same name
//   3. its Namespace's troupe.dev/default-queue annotation
//   4. the cluster default queue (QueueTree::defaultQueue)
// A name that is not a valid queue is an error naming the key, the value and the fix (a pod
// that names a queue never silently joins another one).
#pragma once

#include <string>

#include "troupe/common/status.h"
#include "troupe/sched/queue/queue_spec.h"
#include "troupe/sched/request/pod_request.h"

namespace troupe::sched {

struct QueueMembership {
  std::string queue;
  std::string source;  // which key chose it, for messages ("label troupe.dev/queue", ...)
};

// `namespace_default` is the pod's Namespace's troupe.dev/default-queue ("" when none).
Result<QueueMembership> queueOf(const PodFacts& pod, const QueueTree& tree,
                                const std::string& namespace_default);

}  // namespace troupe::sched
