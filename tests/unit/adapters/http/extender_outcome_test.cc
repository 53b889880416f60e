// troupe_extender_requests_total{verb,outcome}: each verb's outcome is decided where its answer
// is made (ok, error: the protocol's Error field is set, bad_request: a 4xx), standalone and
// with a binder, so the count never depends on reading the encoded answer back.
#include <catch2/catch.hpp>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "adapters/common/extender_metrics.h"
#include "adapters/common/logger.h"
#include "adapters/http/extender_server.h"
#include "support/fixtures.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using Call = std::pair<std::string, std::string>;  // verb, outcome

class RecordingMetrics final : public troupe::adapters::ExtenderMetrics {
 public:
  void observeRequest(const std::string& verb, const std::string& outcome, double) override {
    std::lock_guard lock(mu_);
    calls_.emplace_back(verb, outcome);
  }
  void countRejections(const std::map<std::string, int>&) override {}
  void observePlacement(double, bool) override { ++placements; }
  size_t maxNodeRows() const override { return 0; }
  void refreshCluster(troupe::sched::ClusterSummary) override {}
  void refreshQueues(const std::vector<troupe::sched::QueueStatus>&) override {}
  void observeGangEvents(const troupe::sched::Scheduler::GangEvents&) override {}
  std::string serialize() override { return ""; }

  // The calls recorded since the last take.
  std::vector<Call> take() {
    std::lock_guard lock(mu_);
    return std::exchange(calls_, {});
  }
  int placements = 0;

 private:
  std::mutex mu_;
  std::vector<Call> calls_;
};

class AnsweringBinder final : public troupe::sched::PodBinder {
 public:
  troupe::Result<troupe::model::Allocation> answer = troupe::unavailable("API server down");
  void bindAsync(const troupe::sched::BindRequest&, Done done) override { done(answer); }
};

struct Handler {
  std::ostringstream log;
  troupe::adapters::Logger logger{log, troupe::adapters::LogLevel::kInfo};
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  RecordingMetrics metrics;
  troupe::http::ExtenderHandler handler{troupe::http::HandlerOptions{}, scheduler, metrics, logger};
  Handler() { REQUIRE(scheduler.upsertNode(troupe::testing::gpuNode("n1", 8)).isOk()); }
};

std::string filterBody(const std::string& name) {
  return R"({"Pod":{"metadata":{"name":")" + name + R"(","namespace":"ns","uid":"u-)" + name +
         R"("},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}},)"
         R"("Nodes":null,"NodeNames":["n1"]})";
}
std::string bindBody(const std::string& name) {
  return R"({"PodName":")" + name + R"(","PodNamespace":"ns","PodUID":"u-)" + name + R"(","Node":"n1"})";
}

}  // namespace

TEST_CASE("extender outcomes: filter, prioritize and preempt", "[http][metrics]") {
  Handler h;
  CHECK(h.handler.handle("POST", "/filter", filterBody("a")).status == 200);
  CHECK(h.handler.handle("POST", "/filter", "{").status == 400);
  CHECK(h.handler.handle("POST", "/prioritize", filterBody("a")).status == 200);
  CHECK(h.handler.handle("POST", "/prioritize", "[]").status == 400);
  CHECK(h.handler.handle("POST", "/preempt", R"({"Pod":null})").status == 400);
  CHECK(h.metrics.take() == std::vector<Call>{{"filter", "ok"},
                                              {"filter", "bad_request"},
                                              {"prioritize", "ok"},
                                              {"prioritize", "bad_request"},
                                              {"preempt", "bad_request"}});
}

TEST_CASE("extender outcomes: standalone bind", "[http][metrics][bind]") {
  Handler h;
  SECTION("bound: ok, and the placement is observed") {
    REQUIRE(h.handler.handle("POST", "/filter", filterBody("a")).status == 200);
    h.metrics.take();
    auto r = h.handler.handle("POST", "/bind", bindBody("a"));
    CHECK(r.body == R"({"Error":""})");
    CHECK(h.metrics.take() == std::vector<Call>{{"bind", "ok"}});
    CHECK(h.metrics.placements == 1);
  }
  SECTION("refused (never filtered): error, with the reason in the protocol's Error field") {
    auto r = h.handler.handle("POST", "/bind", bindBody("late"));
    CHECK(r.status == 200);
    CHECK(r.body.find("no record of pod ns/late") != std::string::npos);
    CHECK(h.metrics.take() == std::vector<Call>{{"bind", "error"}});
    CHECK(h.metrics.placements == 0);
  }
  SECTION("a body that is not ExtenderBindingArgs: bad_request") {
    CHECK(h.handler.handle("POST", "/bind", R"({"PodName":"a"})").status == 400);
    CHECK(h.metrics.take() == std::vector<Call>{{"bind", "bad_request"}});
  }
  SECTION("not ready: error, answered without binding") {
    h.handler.setReady(false);
    auto r = h.handler.handle("POST", "/bind", bindBody("a"));
    CHECK(r.body.find("not ready") != std::string::npos);
    CHECK(h.metrics.take() == std::vector<Call>{{"bind", "error"}});
  }
}

TEST_CASE("extender outcomes: bind through a binder", "[http][metrics][bind]") {
  Handler h;
  AnsweringBinder binder;
  h.handler.setBinder(&binder);
  CHECK(h.handler.handle("POST", "/bind", bindBody("a")).body == R"({"Error":"API server down"})");
  CHECK(h.metrics.take() == std::vector<Call>{{"bind", "error"}});

  troupe::model::Allocation a;
  a.pod_uid = "u-a";
  a.node = "n1";
  a.gpus = {0};
  binder.answer = a;
  CHECK(h.handler.handle("POST", "/bind", bindBody("a")).body == R"({"Error":""})");
  CHECK(h.metrics.take() == std::vector<Call>{{"bind", "ok"}});
  CHECK(h.metrics.placements == 1);
}
