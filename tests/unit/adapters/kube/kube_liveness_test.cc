// Watch liveness: a watch stream that stays open but delivers nothing is ended from another
// thread and the pods are listed again, once a binding Troupe made fails to show up on it.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>
#include <thread>

#include "adapters/common/logger.h"
#include "adapters/kube/runtime/kube_runtime.h"
#include "adapters/kube/watch/watcher.h"
#include "adapters/metrics/metrics.h"
#include "support/fixtures.h"
#include "support/kube_test_support.h"
#include "support/wait.h"

namespace {

using troupe::testing::waitFor;

using nlohmann::json;
using troupe::kube::ApiReply;
using troupe::kube::Json;
using troupe::kube::StopSignal;
using troupe::kube::WatchConfig;
using troupe::kube::Watcher;
using troupe::kube::WatchEventType;
using troupe::kube::WatchHandler;
using troupe::kube::testing::FakeApi;
using Clock = std::chrono::steady_clock;

struct Names final : WatchHandler {
  std::vector<std::string> log;
  void beginList() override { log.push_back("begin"); }
  void listed(const Json& o) override { log.push_back("list " + o["metadata"]["name"].get<std::string>()); }
  void endList() override { log.push_back("end"); }
  void event(WatchEventType, const Json& o) override {
    log.push_back("event " + o["metadata"]["name"].get<std::string>());
  }
};

std::string list(const std::string& kind, const json& items, const std::string& rv) {
  return json{{"kind", kind}, {"metadata", {{"resourceVersion", rv}}}, {"items", items}}.dump();
}

std::string added(const std::string& name, const std::string& rv) {
  return json{{"type", "ADDED"}, {"object", {{"metadata", {{"name", name}, {"resourceVersion", rv}}}}}}
      .dump();
}

double value(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

}  // namespace

TEST_CASE("watcher: relistNow() ends a silent stream from another thread; the next step lists",
          "[kube][watch][liveness][concurrency]") {
  FakeApi api;
  Names handler;
  std::ostringstream out;
  troupe::adapters::Logger logger{out, troupe::adapters::LogLevel::kDebug};
  troupe::metrics::Metrics metrics{"test"};
  metrics.enableKube();
  StopSignal stop;
  WatchConfig config;
  config.name = "pods";
  config.path = "/api/v1/pods";
  api.queueList({200, list("PodList", json::array({{{"metadata", {{"name", "a"}}}}}), "10")});
  FakeApi::Stream silent;
  silent.lines = {added("b", "11")};
  silent.hold = true;
  api.queueWatch(silent);
  api.queueList({200, list("PodList", json::array({{{"metadata", {{"name", "c"}}}}}), "20")});
  Watcher w(
      api, config, handler, logger, [] { return 0.0; }, &metrics);

  REQUIRE(w.step(stop));  // the list
  CHECK_FALSE(w.watchingSince());
  bool watched = false;
  std::thread t([&] { watched = w.step(stop); });  // blocks on the silent stream
  const bool opened = waitFor([&] { return w.watchingSince().has_value(); });
  w.relistNow("stale");
  t.join();
  REQUIRE(opened);
  CHECK(watched);  // no backoff: list at once
  CHECK_FALSE(w.watchingSince());
  CHECK(w.resourceVersion().empty());
  CHECK(w.stats().requested == 1);
  REQUIRE(w.step(stop));
  CHECK(w.resourceVersion() == "20");
  CHECK(handler.log ==
        std::vector<std::string>{"begin", "list a", "end", "event b", "begin", "list c", "end"});
  // The watch request asks the server to end it, so even a silent stream is reopened.
  const auto calls = api.calls();
  REQUIRE(calls.size() == 3);
  CHECK(calls[1].method == "WATCH");
  CHECK(calls[1].path.find("timeoutSeconds=300") != std::string::npos);
  CHECK(calls[1].path.find("allowWatchBookmarks=true") != std::string::npos);
  const std::string text = metrics.serialize();
  CHECK(value(text, R"(troupe_kube_watch_restarts_total{reason="stale",resource="pods"})") == 1);
  CHECK(value(text, R"(troupe_kube_relists_total{resource="pods"})") == 1);
  CHECK(out.str().find(R"("reason":"stale")") != std::string::npos);

  SECTION("asked for while no stream is open: the next watch step lists instead") {
    w.relistNow("stale");
    REQUIRE(w.step(stop));  // no watch request
    CHECK(api.calls().size() == 3);
    CHECK(w.resourceVersion().empty());
    api.queueList({200, list("PodList", json::array(), "30")});
    REQUIRE(w.step(stop));
    CHECK(w.resourceVersion() == "30");
    CHECK(w.stats().requested == 2);
  }
}

TEST_CASE("kube runtime: a silent pod watch misses Troupe's binding; the pods are listed again",
          "[kube][liveness][concurrency]") {
  FakeApi api;
  std::ostringstream out;
  troupe::adapters::Logger logger{out, troupe::adapters::LogLevel::kDebug};
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  troupe::metrics::Metrics metrics{"test"};
  // Lists answer from what the fake API holds now; every watch stays open and says nothing.
  std::atomic<int> pod_lists{0};
  api.setHook(
      [&](const std::string& method, const std::string& path, const std::string&) -> std::optional<ApiReply> {
        if (method != "GET") return std::nullopt;
        if (path.rfind("/api/v1/nodes?", 0) == 0) {
          return troupe::kube::replyFromHttp(
              200, list("NodeList", json::array({troupe::kube::testing::nodeJson("n1", 8)}), "5"));
        }
        if (path.rfind("/api/v1/pods?", 0) == 0) {
          json items = json::array();
          if (auto p = api.pod("default", "a")) items.push_back(*p);
          return troupe::kube::replyFromHttp(200, list("PodList", items, std::to_string(10 * ++pod_lists)));
        }
        return std::nullopt;
      });
  FakeApi::Stream silent;
  silent.hold = true;
  silent.match = "/api/v1/nodes?";
  api.queueWatch(silent);
  silent.match = "/api/v1/pods?";
  api.queueWatch(silent);
  api.queueWatch(silent);
  api.putPod(troupe::kube::testing::podJson("a", 4));

  troupe::kube::KubeOptions options;
  options.reconcile_every = std::chrono::milliseconds(20);
  options.watch_echo_timeout = std::chrono::milliseconds(200);
  options.binder.workers = 2;
  troupe::kube::KubeRuntime runtime(api, scheduler, logger, options, &metrics);
  std::atomic<bool> ready{false};
  runtime.start([&] { ready = true; });
  REQUIRE(waitFor([&] { return ready.load() && runtime.podWatcher()->watchingSince().has_value(); }));
  CHECK(runtime.sync().stats().gpu_pods == 0);

  // kube-scheduler filtered it through Troupe first.
  REQUIRE(scheduler.filter(troupe::testing::gpuPod("a", 4), {"n1"}).passed.size() == 1);
  auto bound = runtime.binder().bind({"a", "default", "uid-a", "n1"});
  INFO(bound.status().message());
  REQUIRE(bound.isOk());
  const auto t0 = Clock::now();
  // Troupe's own model shows the pod bound although the watch never said so, and the pods
  // were listed again and are watched from the new list.
  CHECK(waitFor([&] { return runtime.sync().stats().gpu_pods == 1 && pod_lists.load() == 2; }));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  CHECK(seconds >= 0.1);  // not before the binding was overdue
  CHECK(seconds < 2.0);
  REQUIRE(waitFor([&] { return api.count("WATCH", "") == 3; }));
  runtime.stop();

  CHECK(runtime.binder().unechoedCount() == 0);
  std::vector<std::string> pod_watches;
  for (const auto& c : api.calls()) {
    if (c.method == "WATCH" && c.path.rfind("/api/v1/pods?", 0) == 0) pod_watches.push_back(c.path);
  }
  REQUIRE(pod_watches.size() == 2);
  CHECK(pod_watches[0].find("resourceVersion=10&") != std::string::npos);
  CHECK(pod_watches[1].find("resourceVersion=20&") != std::string::npos);
  for (const auto& p : pod_watches) CHECK(p.find("timeoutSeconds=") != std::string::npos);
  const std::string text = metrics.serialize();
  CHECK(value(text, R"(troupe_kube_watch_restarts_total{reason="stale",resource="pods"})") == 1);
  CHECK(value(text, R"(troupe_kube_watch_restarts_total{reason="stale",resource="nodes"})") == 0);
  CHECK(value(text, R"(troupe_kube_relists_total{resource="pods"})") == 1);
  const std::string log = out.str();
  CHECK(log.find("pod watch stale") != std::string::npos);
  CHECK(log.find(R"("msg":"watch restarted: listing again","resource":"pods","reason":"stale")") !=
        std::string::npos);
}
