// Watch, cache and API health in Troupe's metrics (Kubernetes mode), driven by the fake API:
// relists, watch restarts, the last sync time, and API calls by verb and code.
#include <catch2/catch.hpp>
#include <chrono>
#include <regex>
#include <sstream>

#include "adapters/common/logger.h"
#include "adapters/kube/client/metered_transport.h"
#include "adapters/kube/watch/watcher.h"
#include "adapters/metrics/metrics.h"
#include "support/kube_test_support.h"

namespace {

using nlohmann::json;
using troupe::kube::ApiErrorKind;
using troupe::kube::ApiReply;
using troupe::kube::Json;
using troupe::kube::MeteredTransport;
using troupe::kube::StopSignal;
using troupe::kube::WatchConfig;
using troupe::kube::Watcher;
using troupe::kube::WatchEventType;
using troupe::kube::WatchHandler;
using troupe::kube::testing::FakeApi;

struct Ignore final : WatchHandler {
  void beginList() override {}
  void listed(const Json&) override {}
  void endList() override {}
  void event(WatchEventType, const Json&) override {}
};

std::string page(const std::string& rv) {
  return json{{"kind", "NodeList"}, {"metadata", {{"resourceVersion", rv}}}, {"items", json::array()}}.dump();
}

std::string added(const std::string& rv) {
  return json{{"type", "ADDED"}, {"object", {{"metadata", {{"name", "n"}, {"resourceVersion", rv}}}}}}.dump();
}

// The value of one series in the text format; -1 when it is absent.
double value(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

struct Fixture {
  FakeApi fake;
  troupe::metrics::Metrics metrics{"test"};
  MeteredTransport api{fake, metrics};
  Ignore handler;
  std::ostringstream out;
  troupe::adapters::Logger logger{out, troupe::adapters::LogLevel::kError};
  StopSignal stop;
  WatchConfig config;
  Fixture() {
    config.name = "nodes";
    config.path = "/api/v1/nodes";
    metrics.enableKube();
  }
};

}  // namespace

TEST_CASE("kube metrics: a 410 Gone counts a watch restart and a relist; syncs are timestamped",
          "[kube][metrics]") {
  Fixture f;
  f.fake.queueList({200, page("10")});
  f.fake.queueWatch(
      {200,
       {added("11"),
        json{{"type", "ERROR"}, {"object", {{"kind", "Status"}, {"code", 410}, {"message", "too old"}}}}
            .dump()}});
  f.fake.queueList({200, page("20")});
  f.fake.queueWatch({200, {added("21")}});  // ends cleanly: the server's timeout
  Watcher w(
      f.api, f.config, f.handler, f.logger, [] { return 0.0; }, &f.metrics);

  std::string text = f.metrics.serialize();
  CHECK(value(text, R"(troupe_kube_relists_total{resource="nodes"})") == 0);
  CHECK(value(text, R"(troupe_kube_watch_restarts_total{reason="gone",resource="nodes"})") == 0);
  CHECK(value(text, R"(troupe_kube_last_sync_timestamp_seconds{resource="nodes"})") == -1);

  const double before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  REQUIRE(w.step(f.stop));  // the first list: not a relist
  text = f.metrics.serialize();
  CHECK(value(text, R"(troupe_kube_relists_total{resource="nodes"})") == 0);
  CHECK(value(text, R"(troupe_kube_last_sync_timestamp_seconds{resource="nodes"})") >= before - 1);

  REQUIRE(w.step(f.stop));  // an event, then 410
  REQUIRE(w.step(f.stop));  // the relist
  REQUIRE(w.step(f.stop));  // a watch the server closes
  text = f.metrics.serialize();
  CHECK(value(text, R"(troupe_kube_relists_total{resource="nodes"})") == 1);
  CHECK(value(text, R"(troupe_kube_watch_restarts_total{reason="gone",resource="nodes"})") == 1);
  CHECK(value(text, R"(troupe_kube_watch_restarts_total{reason="closed",resource="nodes"})") == 1);
  CHECK(value(text, R"(troupe_kube_watch_restarts_total{reason="error",resource="nodes"})") == 0);
  // Every call went through the metered transport: two lists, two watches, all 200.
  CHECK(value(text, R"(troupe_kube_api_requests_total{code="200",verb="LIST"})") == 2);
  CHECK(value(text, R"(troupe_kube_api_requests_total{code="200",verb="WATCH"})") == 2);
}

TEST_CASE("kube metrics: failed API calls count by verb and code; a broken watch is an error restart",
          "[kube][metrics]") {
  Fixture f;
  f.fake.setHook(
      [](const std::string& method, const std::string&, const std::string&) -> std::optional<ApiReply> {
        if (method == "PATCH") return troupe::kube::replyFromHttp(500, R"({"message":"etcd timeout"})");
        return std::nullopt;
      });
  CHECK(f.api.request("PATCH", "/api/v1/namespaces/ml/pods/a", "{}").status == 500);
  CHECK(f.api.request("PATCH", "/api/v1/namespaces/ml/pods/a", "{}").status == 500);
  CHECK(f.api.request("GET", "/api/v1/namespaces/ml/pods/missing").status == 404);
  // No list scripted: the fake answers like a refused connection, without a status.
  CHECK(f.api.request("GET", "/api/v1/nodes?limit=500").kind == ApiErrorKind::kUnreachable);

  f.fake.queueList({200, page("10")});
  f.fake.queueWatch({200, {added("11")}, ApiErrorKind::kTransport});
  Watcher w(
      f.api, f.config, f.handler, f.logger, [] { return 0.0; }, &f.metrics);
  REQUIRE(w.step(f.stop));
  CHECK_FALSE(w.step(f.stop));

  const std::string text = f.metrics.serialize();
  CHECK(value(text, R"(troupe_kube_api_requests_total{code="500",verb="PATCH"})") == 2);
  CHECK(value(text, R"(troupe_kube_api_requests_total{code="404",verb="GET"})") == 1);
  CHECK(value(text, R"(troupe_kube_api_requests_total{code="Unreachable",verb="LIST"})") == 1);
  CHECK(value(text, R"(troupe_kube_api_requests_total{code="ConnectionLost",verb="WATCH"})") == 1);
  CHECK(value(text, R"(troupe_kube_watch_restarts_total{reason="error",resource="nodes"})") == 1);
  CHECK(value(text, R"(troupe_kube_relists_total{resource="nodes"})") == 0);  // it resumes, no relist
}

TEST_CASE("kube metrics: labels stay bounded", "[kube][metrics]") {
  using troupe::kube::apiVerbLabel;
  CHECK(apiVerbLabel("GET", "/api/v1/pods?fieldSelector=x&limit=500&continue=abc") == "LIST");
  CHECK(apiVerbLabel("GET", "/api/v1/namespaces/ml/pods/train-0") == "GET");
  CHECK(apiVerbLabel("POST", "/api/v1/namespaces/ml/pods/train-0/binding") == "POST");
  CHECK(troupe::kube::apiCodeLabel(troupe::kube::replyFromHttp(409, "{}")) == "409");
  CHECK(troupe::kube::apiCodeLabel(troupe::kube::replyFromFailure(ApiErrorKind::kTransport, "x")) ==
        "ConnectionLost");
}
