// Queue objects (troupe.dev/v1alpha1, cluster-scoped) and Namespaces' troupe.dev/default-queue
// annotation as the core's QueueSpec, and the QueueTree built from them.
//
// Decoding checks types and amounts only (the QueueTree checks names, parents and sums): every
// error names the object, the field, the value and the fix ("queue team-a: spec.weight is -1:
// must be a positive number ..."). A Queue that does not decode is never dropped: it becomes an
// invalid queue of the tree with that error, so its pods are refused with it (and its children
// are invalid as children of an invalid parent) while the other queues work.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "adapters/common/kube_json.h"
#include "troupe/common/status.h"
#include "troupe/sched/queue/queue_spec.h"

namespace troupe::kube {

inline constexpr const char* kQueueGroupVersion = "troupe.dev/v1alpha1";
inline constexpr const char* kQueuesPath = "/apis/troupe.dev/v1alpha1/queues";

struct DecodedQueue {
  std::string name;       // metadata.name; "" when the object has none (it cannot be used at all)
  sched::QueueSpec spec;  // meaningful only when `error` is empty
  std::string error;      // why it does not decode, naming the field and the fix
};

// A v1alpha1 Queue. Fields the core does not read (status, other metadata) are ignored; the
// CRD's schema prunes unknown spec fields before Troupe sees them.
DecodedQueue decodeQueue(const adapters::Json& object);

struct NamespaceQueue {
  std::string ns;
  std::string queue;  // its troupe.dev/default-queue annotation; "" when it has none
};

// A v1.Namespace: its name and its default queue. Fails only without metadata.name.
Result<NamespaceQueue> decodeNamespace(const adapters::Json& object);

// The tree of every decoded queue: those that did not decode are kept as invalid with their
// error. `default_queue` is the cluster default (queues.default of the config).
sched::QueueTree buildQueueTree(const std::vector<DecodedQueue>& queues, const std::string& default_queue);

}  // namespace troupe::kube
