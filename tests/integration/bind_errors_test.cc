// An exception on the bind path (review C3) is answered 500 with a message, counted through
// HandlerOptions::internal_errors, and never ends the process. Before, the bind ran outside
// route()'s try: a throw there was an unobserved task exception, which calls std::terminate.
#include <cpprest/http_client.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "adapters/http/extender_server.h"
#include "adapters/metrics/metrics.h"
#include "support/fixtures.h"

using troupe::testing::freeLoopbackPort;
using troupe::testing::gpuNode;

namespace {

struct Reply {
  int status = 0;
  std::string body;
};

Reply post(const std::string& url, const std::string& path, const std::string& body) {
  web::http::client::http_client client(url);
  web::http::http_request req("POST");
  req.set_request_uri(path);
  req.set_body(body, "application/json");
  web::http::http_response resp = client.request(req).get();
  return {resp.status_code(), resp.extract_utf8string(true).get()};
}

std::string filterBody(const std::string& name) {
  return nlohmann::json{
      {"Pod",
       {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "u-" + name}}},
        {"spec",
         {{"containers", {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}}},
      {"Nodes", nullptr},
      {"NodeNames", {"n1"}}}
      .dump();
}

std::string bindBody(const std::string& name) {
  return nlohmann::json{{"PodName", name}, {"PodNamespace", "ml"}, {"PodUID", "u-" + name}, {"Node", "n1"}}
      .dump();
}

// The handler's metrics, passed through to Prometheus; while `explode` is set, recording a
// placement (the last step of a bind, on the thread that finished it) throws.
class ExplodingMetrics final : public troupe::adapters::ExtenderMetrics {
 public:
  explicit ExplodingMetrics(troupe::metrics::Metrics& inner) : inner_(inner) {}
  std::atomic<bool> explode{false};

  void observeRequest(const std::string& verb, const std::string& outcome, double seconds) override {
    inner_.observeRequest(verb, outcome, seconds);
  }
  void countRejections(const std::map<std::string, int>& categories) override {
    inner_.countRejections(categories);
  }
  void observePlacement(double quality, bool best) override {
    if (explode) throw std::runtime_error("post-bind exploded");
    inner_.observePlacement(quality, best);
  }
  size_t maxNodeRows() const override { return inner_.maxNodeRows(); }
  void refreshCluster(troupe::sched::ClusterSummary summary) override {
    inner_.refreshCluster(std::move(summary));
  }
  void refreshQueues(const std::vector<troupe::sched::QueueStatus>& statuses) override {
    inner_.refreshQueues(statuses);
  }
  void observeGangEvents(const troupe::sched::Scheduler::GangEvents& events) override {
    inner_.observeGangEvents(events);
  }
  std::string serialize() override { return inner_.serialize(); }

 private:
  troupe::metrics::Metrics& inner_;
};

// The pieces serve wires together, with a hook that records where exceptions were caught.
struct Served {
  std::ostringstream log_sink;
  troupe::adapters::Logger logger{log_sink, troupe::adapters::LogLevel::kInfo};
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  troupe::metrics::Metrics metrics{"test"};
  ExplodingMetrics handler_metrics{metrics};
  std::mutex mu;
  std::vector<std::string> caught;
  troupe::http::ExtenderHandler handler{options(), scheduler, handler_metrics, logger};
  troupe::http::ExtenderServer server{"127.0.0.1", freeLoopbackPort(), handler, logger};

  troupe::http::HandlerOptions options() {
    troupe::http::HandlerOptions o;
    o.internal_errors = troupe::adapters::InternalErrors([this](const std::string& where) {
      std::lock_guard lock(mu);
      caught.emplace_back(where);
    });
    return o;
  }
  Served() {
    REQUIRE(scheduler.upsertNode(gpuNode("n1", 8)).isOk());
    REQUIRE(server.start().isOk());
  }
  std::vector<std::string> caughtSoFar() {
    std::lock_guard lock(mu);
    return caught;
  }
};

// Kubernetes mode's binder, answering from its own thread the way the real one does.
class ThreadedBinder : public troupe::sched::PodBinder {
 public:
  explicit ThreadedBinder(
      std::function<void(std::function<void(troupe::Result<troupe::model::Allocation>)>)> answer)
      : answer_(std::move(answer)) {}
  ~ThreadedBinder() override {
    for (std::thread& t : threads_) t.join();
  }
  void bindAsync(const troupe::sched::BindRequest&,
                 std::function<void(troupe::Result<troupe::model::Allocation>)> done) override {
    threads_.emplace_back([this, done = std::move(done)] { answer_(done); });
  }

 private:
  std::function<void(std::function<void(troupe::Result<troupe::model::Allocation>)>)> answer_;
  std::vector<std::thread> threads_;
};

}  // namespace

TEST_CASE("a throw in the standalone bind continuation is a 500, not a crash", "[http][bind][c3]") {
  Served s;
  s.handler_metrics.explode = true;
  REQUIRE(post(s.server.url(), "/filter", filterBody("a")).status == 200);
  Reply r = post(s.server.url(), "/bind", bindBody("a"));
  CHECK(r.status == 500);
  CHECK(r.body.find("post-bind exploded") != std::string::npos);
  CHECK(s.caughtSoFar() == std::vector<std::string>{"http"});
  // Still serving.
  REQUIRE(post(s.server.url(), "/filter", filterBody("b")).status == 200);
  s.handler_metrics.explode = false;
  Reply b = post(s.server.url(), "/bind", bindBody("b"));
  CHECK(b.status == 200);
  CHECK(nlohmann::json::parse(b.body)["Error"] == "");
}

TEST_CASE("a binder's error text with invalid UTF-8 is answered, on the binder's thread",
          "[http][bind][c3]") {
  Served s;
  // An API server's error body cut at byte 200 ends inside a UTF-8 sequence.
  ThreadedBinder binder(
      [](auto done) { done(troupe::unavailable("binding pod ml/a: pods \"a\" is forbidden: \xe2\x82")); });
  s.handler.setBinder(&binder);
  Reply r = post(s.server.url(), "/bind", bindBody("a"));
  CHECK(r.status == 200);
  const std::string error = nlohmann::json::parse(r.body)["Error"];
  CHECK(error.find("is forbidden") != std::string::npos);
  CHECK(s.caughtSoFar().empty());  // encoded (U+FFFD), not thrown
}

TEST_CASE("a binder that throws from bindAsync gets a 500 and a count", "[http][bind][c3]") {
  Served s;
  struct Throwing : troupe::sched::PodBinder {
    void bindAsync(const troupe::sched::BindRequest&,
                   std::function<void(troupe::Result<troupe::model::Allocation>)>) override {
      throw std::logic_error("binder refused to start");
    }
  } binder;
  s.handler.setBinder(&binder);
  Reply r = post(s.server.url(), "/bind", bindBody("a"));
  CHECK(r.status == 500);
  CHECK(r.body.find("binder refused to start") != std::string::npos);
  CHECK(s.caughtSoFar() == std::vector<std::string>{"http"});
  CHECK(post(s.server.url(), "/filter", filterBody("z")).status == 200);
}
