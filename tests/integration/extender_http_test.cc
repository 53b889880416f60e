// The extender over real HTTP: a cpprestsdk listener on loopback, driven by a real client.
#include <cpprest/http_client.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "adapters/http/extender_server.h"
#include "adapters/metrics/metrics.h"
#include "support/fixtures.h"

using troupe::testing::freeLoopbackPort;
using troupe::testing::gpuNode;
using troupe::testing::readFile;
using troupe::testing::sharedDir;

namespace {

struct Served {
  std::ostringstream log_sink;
  troupe::adapters::Logger logger{log_sink, troupe::adapters::LogLevel::kInfo};
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  troupe::metrics::Metrics metrics{"test"};
  troupe::http::ExtenderHandler handler;
  int port = freeLoopbackPort();
  troupe::http::ExtenderServer server{"127.0.0.1", port, handler, logger};

  explicit Served(troupe::http::HandlerOptions options = {}) : handler(options, scheduler, metrics, logger) {
    for (const char* name : {"gpu-node-a1", "gpu-node-a2", "gpu-node-a3"}) {
      REQUIRE(scheduler.upsertNode(gpuNode(name, 8)).isOk());
    }
    REQUIRE(scheduler.upsertNode(gpuNode("gpu-node-b1", 8, "NVIDIA-A100-SXM4-80GB", 81920)).isOk());
    REQUIRE(server.start().isOk());
  }

  struct Reply {
    int status;
    std::string body;
  };
  Reply call(const std::string& method, const std::string& path, const std::string& body = "") {
    web::http::client::http_client client(server.url());
    web::http::http_request req(method);
    req.set_request_uri(path);
    if (!body.empty() || method == "POST") req.set_body(body, "application/json");
    web::http::http_response resp = client.request(req).get();
    return {resp.status_code(), resp.extract_utf8string(true).get()};
  }
};

}  // namespace

TEST_CASE("health, readiness and metrics answer over HTTP", "[http]") {
  Served s;
  CHECK(s.call("GET", "/healthz").status == 200);
  CHECK(s.call("GET", "/readyz").status == 200);
  s.handler.setReady(false);
  CHECK(s.call("GET", "/readyz").status == 503);
  auto metrics = s.call("GET", "/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.body.find("troupe_build_info{version=\"test\"} 1") != std::string::npos);
  CHECK(metrics.body.find("troupe_gpus{product=\"NVIDIA-H100-80GB-HBM3\",state=\"total\"} 24") !=
        std::string::npos);
  CHECK(s.call("GET", "/nope").status == 404);
  CHECK(s.call("GET", "/filter").status == 405);
}

TEST_CASE("the real kube-scheduler filter fixture round-trips over HTTP", "[http][fixtures]") {
  auto dir = sharedDir();
  if (!dir) {
    WARN("../shared/fixtures not found: skipping the fixture round-trip (set TROUPE_SHARED_DIR)");
    return;
  }
  Served s;
  auto body = readFile(*dir + "/fixtures/kube-scheduler/filter-nodecache.json");
  REQUIRE(body);
  auto reply = s.call("POST", "/filter", *body);
  REQUIRE(reply.status == 200);
  auto json = nlohmann::json::parse(reply.body);
  // Every Go field is present; the 4-GPU pod fits the free 8-GPU nodes.
  for (const char* key : {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}) {
    CHECK(json.contains(key));
  }
  CHECK(json["Nodes"].is_null());
  CHECK(json["Error"] == "");
  CHECK(json["NodeNames"].size() == 4);

  auto prio =
      s.call("POST", "/prioritize", *readFile(*dir + "/fixtures/kube-scheduler/prioritize-nodecache.json"));
  REQUIRE(prio.status == 200);
  auto scores = nlohmann::json::parse(prio.body);
  REQUIRE(scores.is_array());
  int tens = 0;
  for (const auto& e : scores) {
    REQUIRE(e["Score"].is_number_integer());
    CHECK(e["Score"].get<int>() >= 0);
    CHECK(e["Score"].get<int>() <= 10);
    tens += e["Score"].get<int>() == 10;
  }
  CHECK(tens == 1);

  auto bind = s.call("POST", "/bind", *readFile(*dir + "/fixtures/kube-scheduler/bind.json"));
  REQUIRE(bind.status == 200);
  CHECK(nlohmann::json::parse(bind.body) == nlohmann::json{{"Error", ""}});
  auto again = s.call("POST", "/bind", *readFile(*dir + "/fixtures/kube-scheduler/bind.json"));
  CHECK(nlohmann::json::parse(again.body) == nlohmann::json{{"Error", ""}});  // idempotent retry
}

TEST_CASE("malformed and oversized bodies get 4xx with a message, and the server keeps serving", "[http]") {
  troupe::http::HandlerOptions options;
  options.max_body_bytes = 4096;
  Served s(options);
  auto bad = s.call("POST", "/filter", "this is not json");
  CHECK(bad.status == 400);
  CHECK(nlohmann::json::parse(bad.body)["error"].get<std::string>().find("not valid JSON") !=
        std::string::npos);

  auto no_pod = s.call("POST", "/filter", R"({"NodeNames":["a"]})");
  CHECK(no_pod.status == 400);
  CHECK(no_pod.body.find("Pod") != std::string::npos);

  auto big = s.call("POST", "/filter", std::string(10000, 'x'));
  CHECK(big.status == 413);
  CHECK(big.body.find("maxBodyBytes") != std::string::npos);

  auto empty_bind = s.call("POST", "/bind", "{}");
  CHECK(empty_bind.status == 400);
  CHECK(empty_bind.body.find("PodName") != std::string::npos);

  CHECK(s.call("GET", "/healthz").status == 200);
  auto metrics = s.call("GET", "/metrics").body;
  CHECK(metrics.find("troupe_extender_requests_total{outcome=\"bad_request\",verb=\"filter\"} 3") !=
        std::string::npos);
}

TEST_CASE("a 16-GPU pod gets every node unresolvable with a reason over HTTP", "[http]") {
  Served s;
  nlohmann::json req = {
      {"Pod",
       {{"metadata", {{"name", "big"}, {"namespace", "ml"}, {"uid", "u-big"}}},
        {"spec",
         {{"containers", {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", "16"}}}}}}}}}},
        {"status", nlohmann::json::object()}}},
      {"Nodes", nullptr},
      {"NodeNames", {"gpu-node-a1", "gpu-node-a2", "gpu-node-b1"}}};
  auto reply = s.call("POST", "/filter", req.dump());
  REQUIRE(reply.status == 200);
  auto json = nlohmann::json::parse(reply.body);
  CHECK(json["NodeNames"] == nlohmann::json::array());
  CHECK(json["FailedNodes"].is_null());
  REQUIRE(json["FailedAndUnresolvableNodes"].size() == 3);
  for (const auto& [node, reason] : json["FailedAndUnresolvableNodes"].items()) {
    CHECK(reason.get<std::string>().find("16") != std::string::npos);
  }
}

TEST_CASE("many concurrent connections get consistent answers", "[http][concurrency]") {
  Served s;
  const std::string body =
      R"({"Pod":{"metadata":{"name":"p","namespace":"ml","uid":"u1"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"2"}}}]},"status":{}},"Nodes":null,"NodeNames":["gpu-node-a1","gpu-node-b1","unknown"]})";
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      web::http::client::http_client client(s.server.url());
      for (int i = 0; i < 25; ++i) {
        web::http::http_request req("POST");
        req.set_request_uri("/filter");
        req.set_body(body, "application/json");
        auto resp = client.request(req).get();
        auto json = nlohmann::json::parse(resp.extract_utf8string(true).get());
        if (resp.status_code() == 200 && json["NodeNames"].size() == 2 &&
            json["FailedAndUnresolvableNodes"].contains("unknown")) {
          ++good;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(good.load() == 200);
}

TEST_CASE("the listener refuses a port that is taken, with a message naming it", "[http]") {
  Served s;
  std::ostringstream sink;
  troupe::adapters::Logger logger(sink, troupe::adapters::LogLevel::kInfo);
  troupe::http::ExtenderServer second("127.0.0.1", s.port, s.handler, logger);
  troupe::Status st = second.start();
  CHECK_FALSE(st.isOk());
  CHECK(st.message().find(std::to_string(s.port)) != std::string::npos);
}

TEST_CASE("gang binds over HTTP wait at the barrier and are answered together", "[http][gang]") {
  Served s;
  auto memberBody = [](int i) {
    nlohmann::json pod = {
        {"metadata",
         {{"name", "w-" + std::to_string(i)},
          {"namespace", "ml"},
          {"uid", "uw-" + std::to_string(i)},
          {"annotations", {{"troupe.dev/gang", "train"}, {"troupe.dev/gang-size", "3"}}}}},
        {"spec", {{"containers", {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", "4"}}}}}}}}}},
        {"status", nlohmann::json::object()}};
    return nlohmann::json{
        {"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {"gpu-node-a1", "gpu-node-a2", "gpu-node-a3"}}}
        .dump();
  };
  std::vector<std::string> planned;
  for (int i = 0; i < 3; ++i) {
    auto reply = s.call("POST", "/filter", memberBody(i));
    auto names = nlohmann::json::parse(reply.body)["NodeNames"];
    REQUIRE(names.size() == 1);
    planned.push_back(names[0]);
  }
  std::atomic<int> answered{0};
  std::vector<std::string> errors(3);
  std::vector<std::thread> binds;
  for (int i = 0; i < 2; ++i) {
    binds.emplace_back([&, i] {
      nlohmann::json b = {{"PodName", "w-" + std::to_string(i)},
                          {"PodNamespace", "ml"},
                          {"PodUID", "uw-" + std::to_string(i)},
                          {"Node", planned[static_cast<size_t>(i)]}};
      errors[static_cast<size_t>(i)] = nlohmann::json::parse(s.call("POST", "/bind", b.dump()).body)["Error"];
      ++answered;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(answered.load() == 0);                     // two of three members: held at the barrier
  CHECK(s.call("GET", "/healthz").status == 200);  // and the server still answers others
  nlohmann::json last = {
      {"PodName", "w-2"}, {"PodNamespace", "ml"}, {"PodUID", "uw-2"}, {"Node", planned[2]}};
  errors[2] = nlohmann::json::parse(s.call("POST", "/bind", last.dump()).body)["Error"];
  for (auto& t : binds) t.join();
  CHECK(answered.load() == 2);
  for (const std::string& e : errors) CHECK(e.empty());
  auto metrics = s.call("GET", "/metrics").body;
  CHECK(metrics.find("troupe_gangs{state=\"admitted\"} 1") != std::string::npos);
  CHECK(metrics.find("troupe_gang_time_to_admit_seconds_count 1") != std::string::npos);
}
