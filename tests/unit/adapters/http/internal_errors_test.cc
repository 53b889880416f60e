// Thread entries that catch, log and count instead of dying: guarded(), the watcher's handler
// calls, the binder's workers and the event poster, and troupe_internal_errors_total{where}.
// Before, an exception on any of these threads reached std::terminate (review C1, C2, C3).
#include "adapters/common/internal_errors.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "adapters/kube/bind/binder.h"
#include "adapters/kube/bind/events.h"
#include "adapters/kube/watch/watcher.h"
#include "adapters/metrics/metrics.h"
#include "support/fixtures.h"
#include "support/kube_test_support.h"
#include "support/wait.h"

namespace {

using nlohmann::json;
using troupe::adapters::InternalErrors;
using troupe::kube::Json;
using troupe::kube::WatchEventType;
using troupe::kube::testing::FakeApi;
using troupe::testing::waitFor;

// Counts per `where`, thread-safe, as the metrics sink would.
struct Counts {
  std::mutex mu;
  std::map<std::string, int> by_where;
  InternalErrors sink() {
    return InternalErrors([this](const std::string& where) {
      std::lock_guard lock(mu);
      ++by_where[where];
    });
  }
  int of(const std::string& where) {
    std::lock_guard lock(mu);
    return by_where[where];
  }
};

// A handler that throws on the objects named "bad" (list and watch) and records the rest.
struct Brittle final : troupe::kube::WatchHandler {
  std::vector<std::string> seen;
  void beginList() override {}
  void listed(const Json& o) override { take(o); }
  void endList() override { seen.push_back("end"); }
  void event(WatchEventType, const Json& o) override { take(o); }
  void take(const Json& o) {
    const std::string name = o["metadata"]["name"].get<std::string>();
    if (name == "bad") throw std::out_of_range("stoi");  // what C1 threw on the watch thread
    if (name == "odd") throw 42;                         // not even a std::exception
    seen.push_back(name);
  }
};

std::string page(const std::vector<std::string>& names, const std::string& rv) {
  json items = json::array();
  for (const auto& n : names) items.push_back({{"metadata", {{"name", n}, {"resourceVersion", "1"}}}});
  return json{{"kind", "NodeList"}, {"metadata", {{"resourceVersion", rv}}}, {"items", items}}.dump();
}

std::string ev(const std::string& type, const std::string& name, const std::string& rv) {
  return json{{"type", type}, {"object", {{"metadata", {{"name", name}, {"resourceVersion", rv}}}}}}.dump();
}

}  // namespace

TEST_CASE("internal errors: guarded() logs, counts and returns instead of throwing", "[hostile][internal]") {
  std::ostringstream log;
  troupe::adapters::Logger logger(log, troupe::adapters::LogLevel::kInfo);
  Counts counts;
  const InternalErrors sink = counts.sink();
  bool ran = false;
  CHECK(troupe::adapters::guarded(logger, sink, "ticker", "tick", [&] { ran = true; }));
  CHECK(ran);
  CHECK(counts.of("ticker") == 0);
  CHECK_FALSE(troupe::adapters::guarded(logger, sink, "ticker", "scheduler tick",
                                        [] { throw std::invalid_argument("stod"); }));
  CHECK_FALSE(troupe::adapters::guarded(logger, sink, "binder", "bind task", [] { throw 7; }));
  CHECK(counts.of("ticker") == 1);
  CHECK(counts.of("binder") == 1);
  const std::string text = log.str();
  CHECK_THAT(text, Catch::Contains("\"where\":\"ticker\""));
  CHECK_THAT(text, Catch::Contains("\"during\":\"scheduler tick\""));
  CHECK_THAT(text, Catch::Contains("\"error\":\"stod\""));
  CHECK_THAT(text, Catch::Contains("not a std::exception"));
  // A sink that throws is ignored; an empty one counts nowhere.
  const InternalErrors throwing([](const std::string&) { throw std::runtime_error("sink"); });
  CHECK_FALSE(troupe::adapters::guarded(logger, throwing, "http", "x", [] { throw 1; }));
  CHECK_FALSE(troupe::adapters::guarded(logger, InternalErrors{}, "http", "x", [] { throw 1; }));
}

TEST_CASE("internal errors: troupe_internal_errors_total{where}", "[hostile][internal][metrics]") {
  troupe::metrics::Metrics metrics("test");
  std::string text = metrics.serialize();
  // Every where exists from the start, at zero, so dashboards and alerts see 0 rather than nothing.
  for (const char* where : {"watch", "binder", "events", "housekeeping", "ticker", "http"}) {
    CHECK_THAT(text, Catch::Contains(std::string("troupe_internal_errors_total{where=\"") + where + "\"} 0"));
  }
  const InternalErrors sink([&metrics](const std::string& where) { metrics.internalError(where); });
  sink.count("binder");
  sink.count("binder");
  text = metrics.serialize();
  CHECK_THAT(text, Catch::Contains("troupe_internal_errors_total{where=\"binder\"} 2"));
}

TEST_CASE("internal errors: a watch handler that throws costs its object, not the thread",
          "[hostile][internal]") {
  FakeApi api;
  Brittle handler;
  std::ostringstream log;
  troupe::adapters::Logger logger(log, troupe::adapters::LogLevel::kDebug);
  Counts counts;
  troupe::kube::WatchConfig config;
  config.name = "nodes";
  config.path = "/api/v1/nodes";
  api.queueList({200, page({"a", "bad", "odd", "c"}, "100")});
  api.queueWatch({200, {ev("ADDED", "bad", "101"), ev("MODIFIED", "d", "102")}});
  troupe::kube::Watcher w(
      api, config, handler, logger, [] { return 0.0; }, nullptr, counts.sink());
  troupe::kube::StopSignal stop;
  bool listed = false;
  REQUIRE_NOTHROW(listed = w.step(stop));  // the list
  CHECK(listed);
  CHECK(w.resourceVersion() == "100");
  bool watched = false;
  REQUIRE_NOTHROW(watched = w.step(stop));  // the watch
  CHECK(handler.seen == std::vector<std::string>{"a", "c", "end", "d"});
  CHECK(w.resourceVersion() == "102");
  CHECK(counts.of("watch") == 3);
  CHECK_THAT(log.str(), Catch::Contains("listed nodes bad (passed over)"));
  (void)watched;
}

TEST_CASE("internal errors: a bind task that throws does not end its worker", "[hostile][internal][kube]") {
  troupe::kube::testing::SyncWorld world;
  FakeApi api;
  Counts counts;
  for (const char* n : {"n1", "n2"})
    REQUIRE(world.scheduler.upsertNode(troupe::testing::gpuNode(n, 8)).isOk());
  troupe::kube::BinderOptions options;
  options.workers = 1;  // one worker: it must survive the throw for the next bind to run at all
  options.internal_errors = counts.sink();
  troupe::kube::Binder binder(api, world.scheduler, world.sync, nullptr, world.logger, options);
  api.setHook([](const std::string&, const std::string& path,
                 const std::string&) -> std::optional<troupe::kube::ApiReply> {
    if (path.find("/pods/boom") != std::string::npos) throw std::runtime_error("transport exploded");
    return std::nullopt;
  });
  auto filtered = [&](const std::string& name) {
    api.putPod(troupe::kube::testing::podJson(name, 2));
    troupe::sched::PodFacts f = troupe::testing::gpuPod(name, 2);
    f.uid = "uid-" + name;
    REQUIRE_FALSE(world.scheduler.filter(f, {"n1"}).passed.empty());
    return troupe::sched::BindRequest{name, "default", "uid-" + name, "n1"};
  };
  const troupe::sched::BindRequest boom = filtered("boom");
  const troupe::sched::BindRequest fine = filtered("fine");
  binder.start();
  binder.bindAsync(boom, [](troupe::Result<troupe::model::Allocation>) {});
  REQUIRE(waitFor([&] { return counts.of("binder") == 1; }));
  auto r = binder.bind(fine);  // the same (only) worker runs it
  INFO(r.status().message());
  CHECK(r.isOk());
  binder.stop();
  CHECK(counts.of("binder") == 1);
  CHECK_THAT(world.log.str(), Catch::Contains("transport exploded"));
}

TEST_CASE("internal errors: the event poster drops an event that throws and goes on",
          "[hostile][internal][kube]") {
  FakeApi api;
  std::ostringstream log;
  troupe::adapters::Logger logger(log, troupe::adapters::LogLevel::kDebug);
  Counts counts;
  std::atomic<int> posts{0};
  api.setHook([&](const std::string& method, const std::string&,
                  const std::string&) -> std::optional<troupe::kube::ApiReply> {
    if (method == "POST" && posts++ == 0) throw std::runtime_error("first post exploded");
    return std::nullopt;
  });
  troupe::kube::EventOptions options;
  options.internal_errors = counts.sink();
  troupe::kube::EventRecorder events(api, logger, options);
  events.start();
  REQUIRE(events.podEvent({"default", "a", "uid-a"}, "Normal", "GPUsAssigned", "first"));
  REQUIRE(waitFor([&] { return counts.of("events") == 1; }));
  REQUIRE(events.podEvent({"default", "b", "uid-b"}, "Normal", "GPUsAssigned", "second"));
  REQUIRE(waitFor([&] { return events.posted() == 1; }));
  events.stop();
  CHECK(events.dropped() == 1);
  CHECK(counts.of("events") == 1);
}
