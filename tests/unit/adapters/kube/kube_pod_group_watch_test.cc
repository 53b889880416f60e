// PodGroups watched (PodGroupCache::watchHandler, fed by a list-then-watch): the cache follows
// ADDED, MODIFIED and DELETED events, bookmarks and relists; a watched group answers lookups
// without a GET; a changed minimum is handed on once (elastic gangs), and through the runtime's
// wiring reaches the core, which releases the members waiting at the barrier.
#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/kube/podgroups/pod_groups.h"
#include "adapters/kube/watch/watcher.h"
#include "support/fixtures.h"
#include "support/kube_test_support.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using nlohmann::json;
using troupe::kube::ApiReply;
using troupe::kube::NativePodGroupApi;
using troupe::kube::PodGroupApi;
using troupe::kube::PodGroupCache;
using troupe::kube::PodGroupOptions;
using troupe::kube::replyFromHttp;
using troupe::kube::StopSignal;
using troupe::kube::WatchConfig;
using troupe::kube::Watcher;
using troupe::kube::WatchEventType;
using troupe::kube::testing::FakeApi;

constexpr const char* kGroup = "/apis/scheduling.x-k8s.io/v1alpha1";

json pluginsGroup(const std::string& name, int min_member, const std::string& rv = "1") {
  return {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
          {"kind", "PodGroup"},
          {"metadata", {{"name", name}, {"namespace", "ml"}, {"resourceVersion", rv}}},
          {"spec", {{"minMember", min_member}}}};
}

json nativeGroup(const std::string& name, int min_count) {
  return {{"apiVersion", "scheduling.k8s.io/v1beta1"},
          {"kind", "PodGroup"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"resourceVersion", "1"}}},
          {"spec", {{"schedulingPolicy", {{"gang", {{"minCount", min_count}}}}}}}};
}

std::string list(const std::vector<json>& items, const std::string& rv) {
  return json{{"kind", "PodGroupList"}, {"metadata", {{"resourceVersion", rv}}}, {"items", items}}.dump();
}

std::string event(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump();
}

std::string bookmark(const std::string& rv) {
  return json{{"type", "BOOKMARK"},
              {"object", {{"kind", "PodGroup"}, {"metadata", {{"resourceVersion", rv}}}}}}
      .dump();
}

// Object reads (the on-demand path) answer 404: whatever a lookup returns without one came
// from the watch.
FakeApi::Hook notFoundOnGet() {
  return
      [](const std::string& method, const std::string& path, const std::string&) -> std::optional<ApiReply> {
        if (method != "GET") return std::nullopt;
        if (path == kGroup)
          return replyFromHttp(200, R"({"kind":"APIResourceList","resources":[{"name":"podgroups"}]})");
        if (path.find("/namespaces/") != std::string::npos)
          return replyFromHttp(404, R"({"kind":"Status","message":"podgroups not found"})");
        return std::nullopt;  // the scripted list
      };
}

struct World {
  FakeApi api;
  std::ostringstream out;
  troupe::adapters::Logger logger{out, troupe::adapters::LogLevel::kDebug};
  StopSignal stop;
  std::vector<std::pair<std::string, int>> changes;
  PodGroupCache cache{api, logger};
  WatchConfig config;
  World() {
    api.setHook(notFoundOnGet());
    cache.onMinChanged([this](const std::string& key, int min) { changes.emplace_back(key, min); });
    config.name = "podgroups";
    config.path = troupe::kube::kSchedulerPluginsPodGroups;
  }
  int gets() {
    return api.count("GET", "/podgroups/a") + api.count("GET", "/podgroups/b") +
           api.count("GET", "/podgroups/c");
  }
};

using Changes = std::vector<std::pair<std::string, int>>;

}  // namespace

TEST_CASE("PodGroup watch: events and bookmarks keep the cache current; a changed minimum is handed on once",
          "[kube][gang][podgroup-watch]") {
  World w;
  w.api.queueList({200, list({pluginsGroup("a", 4), pluginsGroup("b", 2)}, "100")});
  w.api.queueWatch({200,
                    {event("ADDED", pluginsGroup("c", 3, "101")), bookmark("105"),
                     event("MODIFIED", pluginsGroup("a", 3, "106")),
                     event("MODIFIED", pluginsGroup("b", 2, "107")),  // e.g. its status: no change
                     event("DELETED", pluginsGroup("c", 3, "108"))}});
  Watcher watcher(w.api, w.config, w.cache.watchHandler(), w.logger, [] { return 0.0; });
  REQUIRE(watcher.step(w.stop));  // the list
  CHECK(w.changes == Changes{{"ml/a", 4}, {"ml/b", 2}});
  CHECK(w.cache.watchedCount() == 2);
  CHECK(w.cache.lookup("ml", "a").min_member == 4);
  CHECK(w.gets() == 0);  // answered from the watch

  REQUIRE(watcher.step(w.stop));  // the watch
  CHECK(watcher.resourceVersion() == "108");
  CHECK(watcher.stats().bookmarks == 1);
  CHECK(w.changes == Changes{{"ml/a", 4}, {"ml/b", 2}, {"ml/c", 3}, {"ml/a", 3}});
  CHECK(w.cache.lookup("ml", "a").min_member == 3);
  CHECK(w.cache.lookup("ml", "b").min_member == 2);
  CHECK(w.gets() == 0);
  // Deleted: no longer watched; a lookup reads the object on demand (gone: it says so).
  CHECK(w.cache.watchedCount() == 2);
  const troupe::sched::PodGroupInfo c = w.cache.lookup("ml", "c");
  CHECK_FALSE(c.min_member);
  CHECK(c.absent == "PodGroup ml/c does not exist");
  CHECK(w.api.count("GET", "/podgroups/c") == 1);
}

TEST_CASE("PodGroup watch: a relist drops groups deleted meanwhile and hands on minimums changed meanwhile",
          "[kube][gang][podgroup-watch]") {
  World w;
  w.api.queueList({200, list({pluginsGroup("a", 4), pluginsGroup("b", 2)}, "100")});
  w.api.queueWatch({410, {}});  // the resourceVersion is too old: list again
  w.api.queueList({200, list({pluginsGroup("a", 6)}, "300")});
  Watcher watcher(w.api, w.config, w.cache.watchHandler(), w.logger, [] { return 0.0; });
  REQUIRE(watcher.step(w.stop));
  watcher.step(w.stop);           // 410
  REQUIRE(watcher.step(w.stop));  // the relist
  CHECK(watcher.stats().lists == 2);
  CHECK(w.changes == Changes{{"ml/a", 4}, {"ml/b", 2}, {"ml/a", 6}});
  CHECK(w.cache.watchedCount() == 1);
  CHECK(w.cache.lookup("ml", "a").min_member == 6);
  CHECK_FALSE(w.cache.lookup("ml", "b").min_member);  // gone: read on demand, 404
  CHECK(w.api.count("GET", "/podgroups/b") == 1);
}

TEST_CASE(
    "PodGroup watch: a group without a usable minimum is cached with its reason, handed on only once valid",
    "[kube][gang][podgroup-watch]") {
  World w;
  json bad = pluginsGroup("a", 1);
  bad["spec"]["minMember"] = 0;
  w.cache.watchHandler().beginList();
  w.cache.watchHandler().listed(bad);
  w.cache.watchHandler().endList();
  CHECK(w.changes.empty());
  CHECK(w.cache.lookup("ml", "a").absent == "PodGroup ml/a has no spec.minMember from 1 to 100000");
  w.cache.watchHandler().event(WatchEventType::kModified, pluginsGroup("a", 2));
  CHECK(w.changes == Changes{{"ml/a", 2}});
  // An object without metadata is passed over.
  w.cache.watchHandler().event(WatchEventType::kAdded, json{{"spec", {{"minMember", 3}}}});
  CHECK(w.cache.watchedCount() == 1);
  CHECK(w.gets() == 0);
}

TEST_CASE("PodGroup watch: a native group's lowered minCount releases the members waiting at the barrier",
          "[kube][gang][podgroup-watch][native-podgroup]") {
  FakeApi api;
  std::ostringstream out;
  troupe::adapters::Logger logger{out, troupe::adapters::LogLevel::kDebug};
  NativePodGroupApi native(api);
  PodGroupCache cache(api, logger, PodGroupOptions{}, {}, PodGroupApi::kNative, &native);
  troupe::sched::SchedulerConfig config;
  config.gang.timeout = std::chrono::seconds(120);
  troupe::sched::Scheduler s(config);
  // As KubeRuntime wires it.
  cache.onMinChanged([&s](const std::string& key, int min) { s.setGangMinimum(key, min, /*native=*/true); });
  std::vector<std::string> names;
  for (int i = 0; i < 2; ++i) {
    names.push_back("n" + std::to_string(i));
    REQUIRE(s.upsertNode(troupe::testing::gpuNode(names.back(), 8)).isOk());
  }
  cache.watchHandler().beginList();
  cache.watchHandler().listed(nativeGroup("pg", 4));
  cache.watchHandler().endList();
  const auto lookup = [&cache](const std::string& ns, const std::string& name) {
    return cache.lookup(ns, name);
  };

  std::map<int, std::string> answers;
  for (int i = 0; i < 3; ++i) {
    troupe::sched::PodFacts p = troupe::testing::gpuPod("pg-" + std::to_string(i), 4);
    p.scheduling_group = "pg";
    const troupe::sched::FilterResult r = s.filter(p, names, troupe::sched::podGroupFor(p, {}, lookup));
    REQUIRE(r.passed.size() == 1);
    answers[i] = "";
    s.bind(p.uid, p.ns, p.name, r.passed[0], [&answers, i](troupe::Result<troupe::model::Allocation> a) {
      answers[i] = a.isOk() ? "ok" : a.status().message();
    });
  }
  for (int i = 0; i < 3; ++i) CHECK(answers[i].empty());  // 3 of 4 at the barrier
  CHECK(api.calls().empty());                             // the PodGroup came from the watch

  cache.watchHandler().event(WatchEventType::kModified, nativeGroup("pg", 3));
  for (int i = 0; i < 3; ++i) CHECK(answers[i] == "ok");
  CHECK(s.summary().gangs.held_gpus == 0);
  CHECK(cache.lookup("default", "pg").min_member == 3);
  CHECK_FALSE(cache.lookup("default", "pg").priority);

  // spec.priority (v1beta1+) is handed to the core with the minimum (the gang's place in line).
  json ranked = nativeGroup("ranked", 2);
  ranked["spec"]["priority"] = 1000;
  cache.watchHandler().event(WatchEventType::kAdded, ranked);
  CHECK(cache.lookup("default", "ranked").priority == 1000);
}
