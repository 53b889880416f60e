// One watch event of a pending pod parses its request once: decodePod reads it against the
// scheduler's topology levels, and the sync (its pending record) and the core (queue demand,
// the request mix) take it from the view instead of parsing the pod again.
#include <catch2/catch.hpp>

#include "adapters/kube/watch/cluster_sync.h"
#include "support/kube_test_support.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using troupe::Result;
using troupe::kube::decodePod;
using troupe::kube::PodView;
using troupe::kube::testing::podJson;
using troupe::kube::testing::toKube;

struct World : troupe::kube::testing::TeamQueueSyncWorld {
  int64_t pendingMilli() {
    for (const auto& s : scheduler.queueStatuses()) {
      if (s.spec.name == "team-a") return s.pending_milli;
    }
    FAIL("no queue team-a");
    return 0;
  }
};

nlohmann::json queued(const std::string& name, int gpus) {
  nlohmann::json p = podJson(name, gpus);
  p["metadata"]["labels"]["troupe.dev/queue"] = "team-a";
  return p;
}

}  // namespace

TEST_CASE("pod request once: decodePod parses the request against the levels it is given",
          "[kube][sync][parse]") {
  const std::vector<std::string> levels{"example.com/rack"};
  Result<PodView> view = decodePod(toKube(queued("a", 2)), levels);
  REQUIRE(view.isOk());
  REQUIRE(view.value().request);
  CHECK(view.value().request->gpus == 2);
  CHECK(view.value().request_levels == levels);
  CHECK(view.value().gpus == 2);
}

TEST_CASE("pod request once: the sync and the core take the view's request, not a parse of their own",
          "[kube][sync][parse]") {
  World w;
  Result<PodView> view = decodePod(toKube(queued("a", 1)), w.scheduler.config().topology_levels);
  REQUIRE(view.isOk());
  // A request the pod's own annotations would never give: seen downstream only if no one
  // parsed the pod again.
  PodView tampered = view.value();
  tampered.request->gpus = 3;
  w.sync.applyPod(tampered);
  const auto pending = w.sync.pendingPod(tampered.facts.uid);
  REQUIRE(pending);
  REQUIRE(pending->request);
  CHECK(pending->request->gpus == 3);
  CHECK(w.pendingMilli() == 3000);  // Scheduler::notePod took it too

  // A view decoded against other levels is read again with the scheduler's.
  tampered.request_levels = {"example.com/other"};
  w.sync.applyPod(tampered);
  CHECK(w.sync.pendingPod(tampered.facts.uid)->request->gpus == 1);
  CHECK(w.pendingMilli() == 1000);
}

TEST_CASE("pod request once: a request that does not parse is left out without parsing again",
          "[kube][sync][parse]") {
  World w;
  Result<PodView> view = decodePod(toKube(queued("a", 1)), w.scheduler.config().topology_levels);
  REQUIRE(view.isOk());
  PodView unparsed = view.value();
  unparsed.request.reset();
  w.sync.applyPod(unparsed);
  REQUIRE(w.sync.pendingPod(unparsed.facts.uid));
  CHECK_FALSE(w.sync.pendingPod(unparsed.facts.uid)->request);
  CHECK(w.pendingMilli() == 0);
}
