// The extender handler in Kubernetes mode: every verb refuses until the first sync, and bind
// goes to the API binder (not the in-memory reserve) once it is set.
#include <catch2/catch.hpp>
#include <sstream>

#include "adapters/common/logger.h"
#include "adapters/http/extender_server.h"
#include "adapters/metrics/metrics.h"
#include "support/fixtures.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using troupe::http::ExtenderHandler;
using troupe::sched::BindRequest;

class FakeBinder final : public troupe::sched::PodBinder {
 public:
  std::vector<BindRequest> calls;
  troupe::Result<troupe::model::Allocation> answer = troupe::unavailable("API server down");
  void bindAsync(const BindRequest& args,
                 std::function<void(troupe::Result<troupe::model::Allocation>)> done) override {
    calls.push_back(args);
    done(answer);
  }
};

struct Handler {
  std::ostringstream log;
  troupe::adapters::Logger logger{log, troupe::adapters::LogLevel::kInfo};
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  troupe::metrics::Metrics metrics{"test"};
  ExtenderHandler handler{troupe::http::HandlerOptions{}, scheduler, metrics, logger};
};

const char* const kFilter =
    R"({"Pod":{"metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}},"Nodes":null,"NodeNames":["n1"]})";
const char* const kBind = R"({"PodName":"p","PodNamespace":"ns","PodUID":"u1","Node":"n1"})";

}  // namespace

TEST_CASE("kube handler: nothing is answered before the first sync", "[kube][handler]") {
  Handler h;
  REQUIRE(h.scheduler.upsertNode(troupe::testing::gpuNode("n1", 8)).isOk());
  h.handler.setReady(false);
  CHECK(h.handler.handle("GET", "/readyz", "").status == 503);
  CHECK(h.handler.handle("GET", "/healthz", "").status == 200);
  auto filter = h.handler.handle("POST", "/filter", kFilter);
  CHECK(filter.status == 200);
  CHECK(filter.body.find("not ready") != std::string::npos);
  CHECK(filter.body.find("\"NodeNames\":null") != std::string::npos);
  CHECK(h.handler.handle("POST", "/prioritize", kFilter).status == 503);
  auto bind = h.handler.handle("POST", "/bind", kBind);
  CHECK(bind.status == 200);
  CHECK(bind.body.find("not ready") != std::string::npos);
  CHECK_FALSE(h.scheduler.allocationOf("u1"));

  h.handler.setReady(true);
  CHECK(h.handler.handle("GET", "/readyz", "").status == 200);
  filter = h.handler.handle("POST", "/filter", kFilter);
  CHECK(filter.body.find("\"NodeNames\":[\"n1\"]") != std::string::npos);
}

TEST_CASE("kube handler: bind goes to the API binder and reports its answer", "[kube][handler]") {
  Handler h;
  REQUIRE(h.scheduler.upsertNode(troupe::testing::gpuNode("n1", 8)).isOk());
  FakeBinder binder;
  h.handler.setBinder(&binder);
  REQUIRE(h.handler.handle("POST", "/filter", kFilter).status == 200);
  auto r = h.handler.handle("POST", "/bind", kBind);
  REQUIRE(binder.calls.size() == 1);
  CHECK(binder.calls[0].pod_uid == "u1");
  CHECK(binder.calls[0].node == "n1");
  CHECK(r.body == R"({"Error":"API server down"})");
  CHECK_FALSE(h.scheduler.allocationOf("u1"));  // the binder decides what is held, not the handler

  troupe::model::Allocation a;
  a.pod_uid = "u1";
  a.node = "n1";
  a.gpus = {3};
  binder.answer = a;
  r = h.handler.handle("POST", "/bind", kBind);
  CHECK(r.body == R"({"Error":""})");
  CHECK(h.log.str().find("\"gpus\":\"3\"") != std::string::npos);
}
