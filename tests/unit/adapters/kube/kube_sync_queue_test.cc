// The pod watch feeds the queues' accounting: pending GPU pods count as their queue's demand,
// bound ones as what it holds, and deletion (or the start of it) takes them out again.
#include <catch2/catch.hpp>

#include "adapters/kube/watch/cluster_sync.h"
#include "support/kube_test_support.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using nlohmann::json;
using troupe::kube::WatchEventType;
using troupe::kube::testing::podJson;
using troupe::kube::testing::toKube;

struct World : troupe::kube::testing::TeamQueueSyncWorld {
  void pod(const json& p, WatchEventType t = WatchEventType::kModified) {
    sync.podHandler().event(t, toKube(p));
  }
  troupe::sched::QueueStatus status(const std::string& queue) {
    for (const auto& s : scheduler.queueStatuses()) {
      if (s.spec.name == queue) return s;
    }
    FAIL("no status for queue " << queue);
    return {};
  }
};

json queued(const std::string& name, int gpus, const std::string& node = "",
            const std::string& assigned = "") {
  json p = podJson(name, gpus, node, assigned, node.empty() ? "Pending" : "Running");
  p["metadata"]["labels"]["troupe.dev/queue"] = "team-a";
  p["metadata"]["creationTimestamp"] = "2025-12-02T07:20:00Z";
  if (!node.empty()) p["status"]["startTime"] = "2025-12-02T07:21:00Z";
  return p;
}

}  // namespace

TEST_CASE("queue accounting from the pod watch: pending, bound, deleted", "[kube][queue][sync]") {
  World w;
  w.pod(queued("a", 2), WatchEventType::kAdded);
  auto s = w.status("team-a");
  CHECK(s.pending_pods == 1);
  CHECK(s.pending_milli == 2000);
  CHECK(s.running_pods == 0);

  // Bound (by Troupe's binder: the annotation names its GPUs): from demand to holding.
  w.pod(queued("a", 2, "n1", "0,1"));
  s = w.status("team-a");
  CHECK(s.pending_pods == 0);
  CHECK(s.running_pods == 1);
  CHECK(s.allocated_milli == 2000);

  // A second pod, pending; another in the default queue.
  w.pod(queued("b", 4), WatchEventType::kAdded);
  w.pod(podJson("c", 1), WatchEventType::kAdded);
  CHECK(w.status("team-a").pending_pods == 1);
  CHECK(w.status("default").pending_pods == 1);

  // Being deleted: out of the queue at once (pending or bound).
  json deleting = queued("a", 2, "n1", "0,1");
  deleting["metadata"]["deletionTimestamp"] = "2025-12-02T08:00:00Z";
  w.pod(deleting);
  s = w.status("team-a");
  CHECK(s.running_pods == 0);
  CHECK(s.allocated_milli == 0);
  w.pod(queued("b", 4), WatchEventType::kDeleted);
  CHECK(w.status("team-a").pending_pods == 0);
}

TEST_CASE("queue accounting: a pending pod deleted while the watch was down leaves with the relist",
          "[kube][queue][sync]") {
  World w;
  auto& h = w.sync.podHandler();
  h.beginList();
  h.listed(toKube(queued("a", 2)));
  h.listed(toKube(queued("b", 1)));
  h.endList();
  CHECK(w.status("team-a").pending_pods == 2);
  h.beginList();
  h.listed(toKube(queued("a", 2)));
  h.endList();
  CHECK(w.status("team-a").pending_pods == 1);
  CHECK(w.status("team-a").pending_milli == 2000);
}
