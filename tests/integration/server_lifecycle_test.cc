// The server's lifecycle over real HTTP: a second, probes-only listener (serve
// --metrics-listen), and stop() draining requests in flight so no handler outlives the
// scheduler. Run under ASan (build-asan) the drain test is the use-after-free check.
#include <cpprest/http_client.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "adapters/http/extender_server.h"
#include "adapters/metrics/metrics.h"
#include "support/fixtures.h"

using troupe::testing::freeLoopbackPort;
using troupe::testing::gpuNode;

namespace {

using Clock = std::chrono::steady_clock;

struct Reply {
  int status = 0;  // 0: no HTTP answer (connection refused or reset)
  std::string body;
};

Reply call(const std::string& url, const std::string& method, const std::string& path,
           const std::string& body = "") {
  try {
    web::http::client::http_client_config config;
    config.set_timeout(std::chrono::seconds(20));
    web::http::client::http_client client(url, config);
    web::http::http_request req(method);
    req.set_request_uri(path);
    if (!body.empty() || method == "POST") req.set_body(body, "application/json");
    web::http::http_response resp = client.request(req).get();
    return {resp.status_code(), resp.extract_utf8string(true).get()};
  } catch (const std::exception& e) {
    return {0, e.what()};
  }
}

std::string podJson(const std::string& name, int gpus, const std::string& gang = "", int gang_size = 0) {
  nlohmann::json pod = {
      {"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "u-" + name}}},
      {"spec",
       {{"containers",
         {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}},
      {"status", nlohmann::json::object()}};
  if (!gang.empty()) {
    pod["metadata"]["annotations"] = {{"troupe.dev/gang", gang},
                                      {"troupe.dev/gang-size", std::to_string(gang_size)}};
  }
  return pod.dump();
}

std::string filterBody(const std::string& pod_json) {
  return R"({"Pod":)" + pod_json + R"(,"Nodes":null,"NodeNames":["n1","n2","n3","n4"]})";
}

std::string bindBody(const std::string& name, const std::string& node) {
  return nlohmann::json{{"PodName", name}, {"PodNamespace", "ml"}, {"PodUID", "u-" + name}, {"Node", node}}
      .dump();
}

// The parts serve wires together, each owned separately so a test can destroy them in the
// order serve does (server, handler, scheduler) or earlier.
struct Stack {
  std::ostringstream log_sink;
  troupe::adapters::Logger logger{log_sink, troupe::adapters::LogLevel::kInfo};
  std::unique_ptr<troupe::sched::Scheduler> scheduler =
      std::make_unique<troupe::sched::Scheduler>(troupe::sched::SchedulerConfig{});
  troupe::metrics::Metrics metrics{"test"};
  std::unique_ptr<troupe::http::ExtenderHandler> handler = std::make_unique<troupe::http::ExtenderHandler>(
      troupe::http::HandlerOptions{}, *scheduler, metrics, logger);

  Stack() {
    for (const char* name : {"n1", "n2", "n3", "n4"}) REQUIRE(scheduler->upsertNode(gpuNode(name, 8)).isOk());
  }
};

}  // namespace

TEST_CASE("the metrics listener serves probes and /metrics but not the verbs", "[http][lifecycle]") {
  Stack s;
  const int verbs_port = freeLoopbackPort();
  const int probes_port = freeLoopbackPort();
  troupe::http::ExtenderServer verbs("127.0.0.1", verbs_port, *s.handler, s.logger);
  troupe::http::ServerOptions probe_options;
  probe_options.endpoints = troupe::http::Endpoints::kProbesOnly;
  troupe::http::ExtenderServer probes("127.0.0.1", probes_port, *s.handler, s.logger, probe_options);
  REQUIRE(verbs.start().isOk());
  REQUIRE(probes.start().isOk());

  // The verbs on the extender port, and what they did shows on the metrics port.
  Reply f = call(verbs.url(), "POST", "/filter", filterBody(podJson("a", 2)));
  REQUIRE(f.status == 200);
  CHECK(nlohmann::json::parse(f.body)["NodeNames"].size() == 4);
  Reply m = call(probes.url(), "GET", "/metrics");
  REQUIRE(m.status == 200);
  CHECK(m.body.find("troupe_extender_requests_total{outcome=\"ok\",verb=\"filter\"} 1") != std::string::npos);
  CHECK(call(probes.url(), "GET", "/healthz").status == 200);
  CHECK(call(probes.url(), "GET", "/readyz").status == 200);
  s.handler->setReady(false);
  CHECK(call(probes.url(), "GET", "/readyz").status == 503);
  s.handler->setReady(true);

  // No verb on the metrics port, whatever the method, and nothing reaches the scheduler.
  for (const char* verb : {"/filter", "/prioritize", "/bind", "/preempt"}) {
    Reply r = call(probes.url(), "POST", verb, filterBody(podJson("b", 1)));
    CHECK(r.status == 404);
    CHECK(r.body.find("--metrics-listen") != std::string::npos);
  }
  CHECK(call(probes.url(), "GET", "/filter").status == 404);
  CHECK(call(probes.url(), "POST", "/metrics", "{}").status == 404);
  Reply after = call(probes.url(), "GET", "/metrics");
  CHECK(after.body.find("troupe_extender_requests_total{outcome=\"ok\",verb=\"filter\"} 1") !=
        std::string::npos);
  CHECK(after.body.find("verb=\"prioritize\"} 0") != std::string::npos);
  // The extender port keeps serving the probes too (older setups point probes there).
  CHECK(call(verbs.url(), "GET", "/healthz").status == 200);
}

TEST_CASE("stop() drains requests in flight and fails binds parked at a gang barrier", "[http][lifecycle]") {
  auto s = std::make_unique<Stack>();
  troupe::http::ServerOptions options;
  options.drain_grace = std::chrono::milliseconds(500);
  auto server = std::make_unique<troupe::http::ExtenderServer>("127.0.0.1", freeLoopbackPort(), *s->handler,
                                                               s->logger, options);
  REQUIRE(server->start().isOk());
  const std::string url = server->url();

  // A gang of three: all filtered (GPUs held), two binds parked at the barrier; the third
  // never comes.
  std::vector<std::string> planned;
  for (int i = 0; i < 3; ++i) {
    Reply r = call(url, "POST", "/filter", filterBody(podJson("g" + std::to_string(i), 4, "train", 3)));
    INFO(r.body);
    REQUIRE(r.status == 200);
    auto names = nlohmann::json::parse(r.body)["NodeNames"];
    REQUIRE(names.size() == 1);
    planned.push_back(names[0]);
  }
  std::vector<Reply> parked(2);
  std::vector<std::thread> binders;
  for (int i = 0; i < 2; ++i) {
    binders.emplace_back([&, i] {
      parked[static_cast<size_t>(i)] =
          call(url, "POST", "/bind", bindBody("g" + std::to_string(i), planned[static_cast<size_t>(i)]));
    });
  }

  // Many clients keep filtering, prioritizing and binding single pods while the server stops.
  std::atomic<bool> hammering{true};
  std::atomic<int> answered{0}, refused{0}, wrong{0};
  std::mutex wrong_mu;
  std::string first_wrong;
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; hammering.load(); ++i) {
        const std::string name = "p" + std::to_string(t) + "-" + std::to_string(i);
        const std::string pod = podJson(name, 1);
        const int kind = i % 3;
        Reply r = kind == 0   ? call(url, "POST", "/filter", filterBody(pod))
                  : kind == 1 ? call(url, "POST", "/prioritize", filterBody(pod))
                              : call(url, "POST", "/bind", bindBody(name, "n4"));
        // No answer, or cpprestsdk's empty 404 while the listener closes: the handler saw nothing.
        if (r.status == 0 || (r.status == 404 && r.body.empty())) {
          ++refused;
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          continue;
        }
        // During the drain: the protocol's Error (filter, bind) or 503 (prioritize).
        const bool shutting = r.body.find("shutting down") != std::string::npos;
        if (r.status == 200 || (r.status == 503 && shutting)) {
          ++answered;
        } else if (++wrong == 1) {
          std::lock_guard lock(wrong_mu);
          first_wrong = std::to_string(r.status) + " " + r.body;
        }
      }
    });
  }
  while (answered.load() < 100) std::this_thread::sleep_for(std::chrono::milliseconds(5));

  const auto stop_started = Clock::now();
  server->stop();
  const double stop_seconds = std::chrono::duration<double>(Clock::now() - stop_started).count();
  CHECK(server->inFlight() == 0);
  // stop() waited for the parked binds up to the grace, then answered them: bounded.
  CHECK(stop_seconds >= 0.45);
  CHECK(stop_seconds < 5.0);
  for (std::thread& t : binders) t.join();
  for (const Reply& r : parked) {
    REQUIRE(r.status == 200);
    const std::string error = nlohmann::json::parse(r.body)["Error"];
    CHECK(error.find("troupe is shutting down") != std::string::npos);
  }

  // What serve does next: the scheduler and the handler go while clients still knock. Any
  // handler code running now would touch freed memory (ASan reports it).
  s->scheduler.reset();
  s->handler.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  hammering.store(false);
  for (std::thread& t : clients) t.join();
  server.reset();
  INFO("first unexpected answer: " << first_wrong);
  CHECK(wrong.load() == 0);
  CHECK(answered.load() >= 100);
  CHECK(refused.load() > 0);  // the closed listener refuses connections
}

TEST_CASE("requests that arrive while the server drains get an error without reaching the handler",
          "[http][lifecycle]") {
  Stack s;
  troupe::http::ServerOptions options;
  options.drain_grace = std::chrono::seconds(2);
  troupe::http::ExtenderServer server("127.0.0.1", freeLoopbackPort(), *s.handler, s.logger, options);
  REQUIRE(server.start().isOk());
  const std::string url = server.url();
  // One gang member bound: it keeps the drain waiting.
  std::vector<std::string> planned;
  for (const char* name : {"g0", "g1"}) {
    Reply r = call(url, "POST", "/filter", filterBody(podJson(name, 4, "pair", 2)));
    REQUIRE(r.status == 200);
    auto names = nlohmann::json::parse(r.body)["NodeNames"];
    REQUIRE(names.size() == 1);
    planned.push_back(names[0]);
  }
  // The filters' calls leave the open set just after their answers are sent.
  while (server.inFlight() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Reply parked;
  std::thread binder([&] { parked = call(url, "POST", "/bind", bindBody("g0", planned[0])); });
  while (server.inFlight() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::thread stopper([&] { server.stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  Reply late = call(url, "POST", "/filter", filterBody(podJson("late", 1)));
  CHECK(late.status == 200);
  CHECK(late.body.find("no new requests") != std::string::npos);
  CHECK(call(url, "GET", "/readyz").status == 503);
  // The last member arrives during the drain: refused, so the parked one fails at the grace.
  Reply second = call(url, "POST", "/bind", bindBody("g1", planned[1]));
  CHECK(second.body.find("shutting down") != std::string::npos);
  stopper.join();
  binder.join();
  CHECK(parked.status == 200);
  CHECK(parked.body.find("still pending") != std::string::npos);
  // Only the two filters and the parked bind reached the handler.
  const std::string metrics = s.metrics.serialize();
  CHECK(metrics.find("troupe_extender_requests_total{outcome=\"ok\",verb=\"filter\"} 2") !=
        std::string::npos);
}
