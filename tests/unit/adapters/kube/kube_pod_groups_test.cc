// PodGroup lookups for gangs named by the scheduler-plugins label: spec.minMember read from the
// API and cached, the CRD's absence told apart from a missing object, and failures that end
// up in the pod's reason. Also: bound gang members recorded with their gang by the cluster
// sync, so a restarted Troupe counts them.
#include <catch2/catch.hpp>
#include <sstream>

#include "adapters/common/logger.h"
#include "adapters/http/extender_server.h"
#include "adapters/kube/podgroups/pod_groups.h"
#include "adapters/kube/watch/cluster_sync.h"
#include "adapters/metrics/metrics.h"
#include "support/fixtures.h"
#include "support/kube_test_support.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using nlohmann::json;
using troupe::kube::ApiReply;
using troupe::kube::PodGroupCache;
using troupe::kube::PodGroupOptions;
using troupe::kube::replyFromHttp;
using troupe::kube::testing::FakeApi;

constexpr const char* kGroup = "/apis/scheduling.x-k8s.io/v1alpha1";

struct PodGroupServer {
  bool crd = true;
  std::map<std::string, json> groups;  // "ns/name" -> object
  int status = 0;                      // answer every object read with this status (0: normal)

  FakeApi::Hook hook() {
    return [this](const std::string& method, const std::string& path,
                  const std::string&) -> std::optional<ApiReply> {
      if (method != "GET" || path.rfind(kGroup, 0) != 0) return std::nullopt;
      if (!crd)
        return replyFromHttp(
            404, R"({"kind":"Status","message":"the server could not find the requested resource"})");
      if (path == kGroup)
        return replyFromHttp(200, R"({"kind":"APIResourceList","resources":[{"name":"podgroups"}]})");
      if (status) return replyFromHttp(status, R"({"kind":"Status","message":"scripted"})");
      // /apis/scheduling.x-k8s.io/v1alpha1/namespaces/NS/podgroups/NAME
      const std::string rest = path.substr(std::string(kGroup).size() + std::string("/namespaces/").size());
      const std::string ns = rest.substr(0, rest.find('/'));
      const std::string name = rest.substr(rest.rfind('/') + 1);
      auto it = groups.find(ns + "/" + name);
      if (it == groups.end())
        return replyFromHttp(404, R"({"kind":"Status","message":"podgroups not found"})");
      return replyFromHttp(200, it->second.dump());
    };
  }
};

json podGroup(const std::string& name, json min_member) {
  return {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
          {"kind", "PodGroup"},
          {"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec", {{"minMember", min_member}}}};
}

struct Clock {
  PodGroupCache::Clock::time_point t = PodGroupCache::Clock::time_point{} + std::chrono::hours(1);
};

}  // namespace

TEST_CASE("kube PodGroups: minMember is read once and cached", "[kube][gang]") {
  FakeApi api;
  PodGroupServer server;
  server.groups["ml/train"] = podGroup("train", 16);
  api.setHook(server.hook());
  std::ostringstream log;
  troupe::adapters::Logger logger(log, troupe::adapters::LogLevel::kDebug);
  Clock clock;
  PodGroupCache cache(api, logger, PodGroupOptions{}, [&clock] { return clock.t; });

  troupe::sched::PodGroupInfo info = cache.lookup("ml", "train");
  REQUIRE(info.min_member);
  CHECK(*info.min_member == 16);
  CHECK(info.absent.empty());
  const uint64_t reads = cache.apiReads();
  CHECK(cache.lookup("ml", "train").min_member == 16);
  CHECK(cache.apiReads() == reads);  // cached
  CHECK(api.count("GET", "/podgroups/train") == 1);

  // A changed minMember is seen once the entry expires.
  server.groups["ml/train"] = podGroup("train", 12);
  clock.t += std::chrono::seconds(11);
  CHECK(cache.lookup("ml", "train").min_member == 12);
}

TEST_CASE("kube PodGroups: missing object, missing CRD, bad spec and RBAC say why", "[kube][gang]") {
  FakeApi api;
  PodGroupServer server;
  api.setHook(server.hook());
  std::ostringstream log;
  troupe::adapters::Logger logger(log, troupe::adapters::LogLevel::kDebug);
  Clock clock;
  PodGroupCache cache(api, logger, PodGroupOptions{}, [&clock] { return clock.t; });

  troupe::sched::PodGroupInfo missing = cache.lookup("ml", "later");
  CHECK_FALSE(missing.min_member);
  CHECK(missing.absent == "PodGroup ml/later does not exist");
  // Created just after its pods: seen within the short negative TTL.
  server.groups["ml/later"] = podGroup("later", 4);
  CHECK_FALSE(cache.lookup("ml", "later").min_member);
  clock.t += std::chrono::seconds(3);
  CHECK(cache.lookup("ml", "later").min_member == 4);

  server.groups["ml/bad"] = podGroup("bad", "lots");
  CHECK_THAT(cache.lookup("ml", "bad").absent, Catch::Contains("has no spec.minMember"));
  server.groups["ml/zero"] = podGroup("zero", 0);
  CHECK_FALSE(cache.lookup("ml", "zero").min_member);

  server.status = 403;
  CHECK_THAT(cache.lookup("ml", "secret").absent, Catch::Contains("RBAC"));
  server.status = 0;

  FakeApi bare;
  PodGroupServer no_crd;
  no_crd.crd = false;
  bare.setHook(no_crd.hook());
  PodGroupCache without(bare, logger, PodGroupOptions{}, [&clock] { return clock.t; });
  troupe::sched::PodGroupInfo absent = without.lookup("ml", "train");
  CHECK_FALSE(absent.min_member);
  CHECK_THAT(absent.absent, Catch::Contains("CRD"));
  CHECK_THAT(absent.absent, Catch::Contains("not installed"));
  CHECK(bare.count("GET", "/podgroups/train") == 0);  // discovery said so: no object read
  without.lookup("ml", "other");
  CHECK(bare.count("GET", "v1alpha1") == 1);  // the CRD's absence is cached too
}

TEST_CASE("kube PodGroups: the scheduler's filter uses the lookup; gang-size is the fallback",
          "[kube][gang]") {
  FakeApi api;
  PodGroupServer server;
  server.crd = false;
  api.setHook(server.hook());
  std::ostringstream log;
  troupe::adapters::Logger logger(log, troupe::adapters::LogLevel::kDebug);
  PodGroupCache cache(api, logger);
  troupe::sched::Scheduler s{troupe::sched::SchedulerConfig{}};
  // What the HTTP adapter does before calling the core (ExtenderHandler::setPodGroups).
  const troupe::sched::PodGroupLookup lookup = [&](const std::string& ns, const std::string& name) {
    return cache.lookup(ns, name);
  };
  REQUIRE(s.upsertNode(troupe::testing::gpuNode("n1", 8)).isOk());

  troupe::sched::PodFacts p = troupe::testing::gpuPod("m0", 2);
  p.labels[troupe::sched::kPodGroupLabel] = "pg";
  troupe::sched::FilterResult r = s.filter(p, {"n1"}, troupe::sched::podGroupFor(p, lookup));
  REQUIRE(r.unresolvable.contains("n1"));
  CHECK_THAT(r.unresolvable.at("n1"), Catch::Contains("CRD"));
  CHECK_THAT(r.unresolvable.at("n1"), Catch::Contains("troupe.dev/gang-size"));

  p.annotations[troupe::sched::kGangSize] = "2";
  CHECK(s.filter(p, {"n1"}, troupe::sched::podGroupFor(p, lookup)).passed.size() == 1);
  CHECK(s.summary().gangs.held_gpus == 4);
}

TEST_CASE("kube PodGroups: the HTTP filter reads the PodGroup before it calls the core", "[kube][gang]") {
  // ExtenderHandler over a one-node Scheduler, and an API server with PodGroup ml/train.
  struct Served {
    FakeApi api;
    PodGroupServer server;
    std::ostringstream log;
    troupe::adapters::Logger logger{log, troupe::adapters::LogLevel::kWarn};
    PodGroupCache cache{api, logger};
    troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
    troupe::metrics::Metrics metrics{"test"};
    troupe::http::ExtenderHandler handler{troupe::http::HandlerOptions{}, scheduler, metrics, logger};
  } served;
  served.server.groups["ml/train"] = podGroup("train", 2);
  served.api.setHook(served.server.hook());
  troupe::sched::Scheduler& s = served.scheduler;
  troupe::http::ExtenderHandler& handler = served.handler;
  PodGroupCache& cache = served.cache;
  REQUIRE(s.upsertNode(troupe::testing::gpuNode("n1", 8)).isOk());
  auto body = [](const std::string& name) {
    return R"({"Pod":{"metadata":{"name":")" + name + R"(","namespace":"ml","uid":"uid-)" + name +
           R"(","labels":{"scheduling.x-k8s.io/pod-group":"train"}},"spec":{"containers":[{"name":"c",)" +
           R"("resources":{"limits":{"nvidia.com/gpu":"2"}}}]}},"Nodes":null,"NodeNames":["n1"]})";
  };

  // No lookup (standalone): the reason says PodGroups are not read.
  const auto unread = handler.handle("POST", "/filter", body("m0"));
  CHECK_THAT(unread.body, Catch::Contains("Troupe does not read PodGroups without the Kubernetes API"));
  CHECK(s.summary().gangs.held_gpus == 0);

  handler.setPodGroups(
      [&](const std::string& ns, const std::string& name) { return cache.lookup(ns, name); });
  const auto read = handler.handle("POST", "/filter", body("m1"));
  CHECK_THAT(read.body, Catch::Contains(R"("NodeNames":["n1"])"));
  CHECK(s.summary().gangs.held_gpus == 4);  // minMember 2 of 2 GPUs, from the PodGroup
}

TEST_CASE("kube sync: bound gang members are recorded with their gang", "[kube][sync][gang]") {
  std::ostringstream log;
  troupe::adapters::Logger logger(log, troupe::adapters::LogLevel::kDebug);
  troupe::sched::Scheduler s{troupe::sched::SchedulerConfig{}};
  troupe::kube::ClusterSync sync(s, logger);
  sync.nodeHandler().event(troupe::kube::WatchEventType::kAdded,
                           troupe::kube::testing::toKube(troupe::kube::testing::nodeJson("n1", 8)));
  json member = troupe::kube::testing::podJson("w0", 4, "n1", "0,1,2,3");
  member["metadata"]["annotations"]["troupe.dev/gang"] = "train";
  sync.podHandler().event(troupe::kube::WatchEventType::kAdded, troupe::kube::testing::toKube(member));
  json labelled = troupe::kube::testing::podJson("w1", 4, "n1", "4,5,6,7");
  labelled["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "pg";
  sync.podHandler().event(troupe::kube::WatchEventType::kAdded, troupe::kube::testing::toKube(labelled));
  REQUIRE(s.allocationOf("uid-w0"));
  CHECK(s.allocationOf("uid-w0")->gang == "default/train");
  CHECK(s.allocationOf("uid-w1")->gang == "default/pg");
  CHECK(s.allocationOf("uid-w1")->gpus == std::vector<int>{4, 5, 6, 7});
}
