// The pod waker's writes (pod_waker.h): one merge patch on pods/status per pod the core chose,
// carrying the uid and troupe.dev/wake; nothing for a pod the watch no longer shows pending; a
// rate and an in-flight bound; a 403 (an older ClusterRole) warned about once.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/kube/queues/pod_waker.h"

using namespace troupe;
using namespace troupe::kube;

namespace {

struct RecordingApi final : KubeTransport {
  struct Call {
    std::string method, path, body, content_type;
  };
  std::mutex mu;
  std::vector<Call> calls;
  int status = 200;
  std::chrono::milliseconds delay{0};
  std::atomic<int> in_flight{0}, max_in_flight{0};

  ApiReply request(const std::string& method, const std::string& path, const std::string& body,
                   const std::string& content_type) override {
    const int now = ++in_flight;
    for (int seen = max_in_flight.load(); now > seen && !max_in_flight.compare_exchange_weak(seen, now);) {
    }
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    --in_flight;
    std::lock_guard lock(mu);
    calls.push_back({method, path, body, content_type});
    return replyFromHttp(status, status == 403 ? R"({"message":"forbidden"})" : "{}");
  }
  ApiReply stream(const std::string&, std::chrono::seconds, const std::function<bool(std::string&)>&,
                  StopSignal&) override {
    return replyFromHttp(404, "");
  }
};

sched::WakeCandidate pod(const std::string& name) {
  return {"uid-" + name, "team-a/" + name, "q", "", 1000, 0, 0};
}

PodWaker::Plan planOnce(std::vector<sched::WakeCandidate> pods) {
  auto left = std::make_shared<std::vector<sched::WakeCandidate>>(std::move(pods));
  return [left](sched::WakePlanner&) { return std::exchange(*left, {}); };
}

}  // namespace

TEST_CASE("pod waker: one pods/status merge patch per chosen pod, with its uid", "[wake][kube]") {
  RecordingApi api;
  std::ostringstream log;
  adapters::Logger logger(log, adapters::LogLevel::kInfo);
  PodWaker waker(api, planOnce({pod("a"), pod("gone"), pod("b")}),
                 [](const std::string& uid) { return uid != "uid-gone"; }, logger, {});
  StopSignal stop;
  CHECK(waker.round(stop) == 2);
  REQUIRE(api.calls.size() == 2);
  std::set<std::string> paths;
  std::string stamp;
  for (const RecordingApi::Call& c : api.calls) {
    CHECK(c.method == "PATCH");
    CHECK(c.content_type == "application/merge-patch+json");
    paths.insert(c.path);
    const nlohmann::json body = nlohmann::json::parse(c.body);
    CHECK(body.size() == 1);  // metadata only
    CHECK(body["metadata"]["uid"] == "uid-" + c.path.substr(c.path.rfind("/pods/") + 6, 1));
    const std::string value = body["metadata"]["annotations"][contract::kWakeAnnotation];
    CHECK(!value.empty());
    if (!stamp.empty()) CHECK(value == stamp);  // one value per round
    stamp = value;
  }
  CHECK(paths == std::set<std::string>{"/api/v1/namespaces/team-a/pods/a/status",
                                       "/api/v1/namespaces/team-a/pods/b/status"});
  CHECK(waker.writes() == 2);
  CHECK(waker.woken() == 2);
  CHECK(waker.round(stop) == 0);  // nothing planned: nothing written
  CHECK(api.calls.size() == 2);
}

TEST_CASE("pod waker: writes are rate-limited and bounded in flight", "[wake][kube]") {
  RecordingApi api;
  api.delay = std::chrono::milliseconds(20);
  std::ostringstream log;
  adapters::Logger logger(log, adapters::LogLevel::kError);
  std::vector<sched::WakeCandidate> pods;
  for (int i = 0; i < 30; ++i) pods.push_back(pod("p" + std::to_string(i)));
  PodWakeOptions o;
  o.max_in_flight = 3;
  o.rate_per_second = 100;
  o.burst = 10;
  PodWaker waker(api, planOnce(pods), {}, logger, o);
  StopSignal stop;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(waker.round(stop) == 30);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(api.max_in_flight.load() <= 3);
  CHECK(api.max_in_flight.load() >= 2);
  // 10 from the bucket, then 20 more at 100/s: at least 0.2 s (loose: the machine may be slow).
  CHECK(secs >= 0.18);
}

TEST_CASE("pod waker: a forbidden write is warned about once", "[wake][kube]") {
  RecordingApi api;
  api.status = 403;
  std::ostringstream log;
  adapters::Logger logger(log, adapters::LogLevel::kInfo);
  PodWaker waker(api, planOnce({pod("a"), pod("b"), pod("c")}), {}, logger, {});
  StopSignal stop;
  CHECK(waker.round(stop) == 0);
  CHECK(waker.writes() == 3);
  CHECK(waker.woken() == 0);
  const std::string text = log.str();
  const std::string needle = "cannot wake pending pods";
  const size_t first = text.find(needle);
  REQUIRE(first != std::string::npos);
  CHECK(text.find(needle, first + 1) == std::string::npos);
}

TEST_CASE("pod waker: the wake patch", "[wake][kube]") {
  const nlohmann::json p = nlohmann::json::parse(wakePatch("u-1", "123-4"));
  CHECK(p ==
        nlohmann::json::parse(R"({"metadata":{"uid":"u-1","annotations":{"troupe.dev/wake":"123-4"}}})"));
}
