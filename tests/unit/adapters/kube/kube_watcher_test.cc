// List-then-watch against a scripted API: pages, resourceVersions, bookmarks, 410 Gone and
// relists, failures and backoff.
#include <catch2/catch.hpp>
#include <sstream>

#include "adapters/common/logger.h"
#include "adapters/kube/watch/watcher.h"
#include "support/kube_test_support.h"

namespace {

using nlohmann::json;
using troupe::kube::ApiErrorKind;
using troupe::kube::Backoff;
using troupe::kube::Json;
using troupe::kube::StopSignal;
using troupe::kube::WatchConfig;
using troupe::kube::Watcher;
using troupe::kube::WatchEventType;
using troupe::kube::WatchHandler;
using troupe::kube::testing::FakeApi;

struct Recorder final : WatchHandler {
  std::vector<std::string> log;
  void beginList() override { log.push_back("begin"); }
  void listed(const Json& o) override { log.push_back("list " + o["metadata"]["name"].get<std::string>()); }
  void endList() override { log.push_back("end"); }
  void event(WatchEventType t, const Json& o) override {
    const char* name = t == WatchEventType::kAdded      ? "ADDED"
                       : t == WatchEventType::kModified ? "MODIFIED"
                                                        : "DELETED";
    log.push_back(std::string(name) + " " + o["metadata"]["name"].get<std::string>());
  }
};

std::string page(const std::vector<std::string>& names, const std::string& rv, const std::string& cont = "") {
  json items = json::array();
  for (const auto& n : names) items.push_back({{"metadata", {{"name", n}, {"resourceVersion", "1"}}}});
  json meta = {{"resourceVersion", rv}};
  if (!cont.empty()) meta["continue"] = cont;
  return json{{"kind", "PodList"}, {"metadata", meta}, {"items", items}}.dump();
}

std::string ev(const std::string& type, const std::string& name, const std::string& rv) {
  return json{{"type", type}, {"object", {{"metadata", {{"name", name}, {"resourceVersion", rv}}}}}}.dump();
}

struct Fixture {
  FakeApi api;
  Recorder handler;
  std::ostringstream out;
  troupe::adapters::Logger logger{out, troupe::adapters::LogLevel::kDebug};
  StopSignal stop;
  WatchConfig config;
  Fixture() {
    config.name = "pods";
    config.path = "/api/v1/pods";
    config.field_selector = "status.phase!=Succeeded";
    config.page_size = 2;
  }
};

}  // namespace

TEST_CASE("watcher: paged list, then watch from the list's resourceVersion", "[kube][watch]") {
  Fixture f;
  f.api.queueList({200, page({"a", "b"}, "100", "tok1")});
  f.api.queueList({200, page({"c"}, "100")});
  f.api.queueWatch({200,
                    {ev("ADDED", "d", "101"), ev("BOOKMARK", "", "105"), ev("MODIFIED", "a", "107"),
                     ev("DELETED", "b", "108")}});
  Watcher w(f.api, f.config, f.handler, f.logger, [] { return 0.0; });
  REQUIRE(w.step(f.stop));  // the list
  CHECK(w.resourceVersion() == "100");
  REQUIRE(w.step(f.stop));  // the watch
  CHECK(w.resourceVersion() == "108");
  CHECK(f.handler.log == std::vector<std::string>{"begin", "list a", "list b", "list c", "end", "ADDED d",
                                                  "MODIFIED a", "DELETED b"});
  auto calls = f.api.calls();
  REQUIRE(calls.size() == 3);
  CHECK(calls[0].path == "/api/v1/pods?fieldSelector=status.phase%21%3DSucceeded&limit=2");
  CHECK(calls[1].path.find("&continue=tok1") != std::string::npos);
  CHECK(calls[2].method == "WATCH");
  CHECK(calls[2].path.find("watch=true") != std::string::npos);
  CHECK(calls[2].path.find("allowWatchBookmarks=true") != std::string::npos);
  CHECK(calls[2].path.find("resourceVersion=100") != std::string::npos);
  CHECK(calls[2].path.find("timeoutSeconds=300") != std::string::npos);
  CHECK(w.stats().bookmarks == 1);
  CHECK(w.stats().events == 3);
}

TEST_CASE("watcher: a watch resumes from the last resourceVersion after a broken connection",
          "[kube][watch]") {
  Fixture f;
  f.api.queueList({200, page({"a"}, "10")});
  f.api.queueWatch({200, {ev("ADDED", "b", "11")}, ApiErrorKind::kTransport});
  f.api.queueWatch({200, {ev("ADDED", "c", "12")}});
  Watcher w(f.api, f.config, f.handler, f.logger, [] { return 0.5; });
  REQUIRE(w.step(f.stop));
  CHECK_FALSE(w.step(f.stop));  // broken: run() would back off
  CHECK(w.resourceVersion() == "11");
  REQUIRE(w.step(f.stop));
  CHECK(f.api.calls().back().path.find("resourceVersion=11") != std::string::npos);
  CHECK(f.handler.log == std::vector<std::string>{"begin", "list a", "end", "ADDED b", "ADDED c"});
}

TEST_CASE("watcher: 410 Gone relists; an expired continue token restarts the list", "[kube][watch]") {
  Fixture f;
  f.api.queueList({200, page({"a"}, "10")});
  f.api.queueWatch(
      {200,
       {ev("ADDED", "b", "11"),
        json{{"type", "ERROR"},
             {"object", {{"kind", "Status"}, {"code", 410}, {"message", "too old resource version"}}}}
            .dump()}});
  f.api.queueList({200, page({"a", "b"}, "50", "tok")});
  f.api.queueList({410, R"({"message":"continue token expired"})"});
  f.api.queueList({200, page({"a", "b"}, "60", "tok2")});
  f.api.queueList({200, page({"c"}, "60")});
  f.api.queueWatch({410, {}, ApiErrorKind::kNone});  // as an HTTP status this time
  Watcher w(f.api, f.config, f.handler, f.logger, [] { return 0.0; });
  REQUIRE(w.step(f.stop));
  REQUIRE(w.step(f.stop));  // the event, then 410
  CHECK(w.resourceVersion().empty());
  REQUIRE(w.step(f.stop));  // relist, restarted once
  CHECK(w.resourceVersion() == "60");
  CHECK(f.handler.log == std::vector<std::string>{"begin", "list a", "end", "ADDED b", "begin", "list a",
                                                  "list b", "begin", "list a", "list b", "list c", "end"});
  CHECK_FALSE(w.step(f.stop));  // 410 at once: back off before listing again
  CHECK(w.resourceVersion().empty());
  CHECK(w.stats().gone == 2);
}

TEST_CASE("watcher: failures back off exponentially with jitter, capped", "[kube][watch]") {
  double u = 0.0;
  Backoff b(std::chrono::milliseconds(500), std::chrono::milliseconds(30000), [&u] { return u; });
  CHECK(b.next().count() == 250);  // [step/2, step)
  CHECK(b.next().count() == 500);
  CHECK(b.next().count() == 1000);
  u = 0.999;
  CHECK(b.next().count() == 3998);
  for (int i = 0; i < 10; ++i) b.next();
  CHECK(b.step().count() == 30000);
  u = 0.0;
  CHECK(b.next().count() == 15000);
  b.reset();
  CHECK(b.next().count() == 250);
}

TEST_CASE("watcher: run() backs off on failures and stops promptly", "[kube][watch][concurrency]") {
  Fixture f;
  f.config.backoff_initial = std::chrono::milliseconds(1);
  f.config.backoff_cap = std::chrono::milliseconds(4);
  f.api.queueList({500, R"({"message":"etcd down"})"});
  f.api.queueList({200, page({"a"}, "10")});
  f.api.setHook([&f](const std::string&, const std::string&,
                     const std::string&) -> std::optional<troupe::kube::ApiReply> {
    if (f.api.calls().size() >= 2) f.stop.stop();  // during the list that succeeds
    return std::nullopt;
  });
  Watcher w(f.api, f.config, f.handler, f.logger, [] { return 0.0; });
  std::thread t([&] { w.run(f.stop); });
  t.join();
  CHECK(w.stats().failures >= 1);
  CHECK(f.out.str().find("etcd down") != std::string::npos);
}
