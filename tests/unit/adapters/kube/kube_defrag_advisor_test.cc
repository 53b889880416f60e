// The defragmentation advisor against a fake API server: which pending pods it plans for
// (minGpus, minPending, gangs once), one DefragAdvice event per unchanged advice, nothing
// evicted unless defrag.evict, then every dry run before any eviction (a PodDisruptionBudget's
// 429 evicts nobody).
#include <catch2/catch.hpp>
#include <map>
#include <sstream>

#include "adapters/common/logger.h"
#include "adapters/kube/bind/events.h"
#include "adapters/kube/defrag/defrag_advisor.h"
#include "support/kube_test_support.h"

namespace {

using nlohmann::json;
using troupe::kube::ApiReply;
using troupe::kube::ClusterSync;
using troupe::kube::replyFromHttp;
using troupe::kube::testing::FakeApi;
using Clock = std::chrono::system_clock;

struct Logs {
  std::ostringstream out;
  troupe::adapters::Logger logger{out, troupe::adapters::LogLevel::kDebug};
};

ClusterSync::PendingPod pending(const std::string& name, int gpus, Clock::time_point created,
                                const std::string& gang = "") {
  ClusterSync::PendingPod p;
  p.ns = "ml";
  p.name = name;
  p.scheduler_name = "troupe-scheduler";
  p.gang = gang;
  p.created = created;
  troupe::sched::GpuRequest r;
  r.gpus = gpus;
  p.request = r;
  return p;
}

troupe::sched::DefragAdvice planFreeing(const std::string& node, std::vector<std::string> pods) {
  troupe::sched::DefragAdvice a;
  a.outcome = troupe::sched::DefragAdvice::Outcome::kPlan;
  troupe::sched::DefragFreed f;
  f.node = node;
  for (const std::string& p : pods) {
    f.moves.push_back({"uid-" + p, "batch/" + p, node, "n9", {0}, 1000});
    ++a.moves;
    a.milli_moved += 1000;
  }
  f.free_gpus_after = 8;
  f.connected_after = 8;
  a.freed.push_back(f);
  return a;
}

// No per-pod interval: every change of advice shows as an event.
troupe::kube::EventOptions everyChange() {
  troupe::kube::EventOptions o;
  o.per_key_interval = std::chrono::seconds(0);
  return o;
}

struct World {
  Logs logs;
  FakeApi api;
  troupe::kube::EventRecorder events{api, logs.logger, everyChange()};
  Clock::time_point now = Clock::now();
  std::vector<std::pair<std::string, ClusterSync::PendingPod>> pods;
  std::vector<troupe::sched::DefragAsk> asked;
  std::set<std::string> pinned_seen;
  troupe::sched::DefragAdvice advice = planFreeing("n1", {"small"});
  std::vector<std::pair<std::string, bool>> evictions;  // pod, dry run
  std::string refuse_dry_run;

  troupe::kube::DefragAdvisor make(troupe::kube::DefragOptions options) {
    return troupe::kube::DefragAdvisor(api,
                                       troupe::kube::DefragCore{[this] { return pods; },
                                                                [this](const troupe::sched::DefragAsk& ask,
                                                                       std::set<std::string> pinned, int) {
                                                                  asked.push_back(ask);
                                                                  pinned_seen = std::move(pinned);
                                                                  return advice;
                                                                }},
                                       &events, logs.logger, options, nullptr);
  }
  World() {
    api.setHook([this](const std::string& method, const std::string& path,
                       const std::string& body) -> std::optional<ApiReply> {
      if (method != "POST" || path.find("/eviction") == std::string::npos) return std::nullopt;
      json e = json::parse(body);
      const std::string pod = e["metadata"]["name"];
      const bool dry = e["deleteOptions"].contains("dryRun");
      CHECK(path == "/api/v1/namespaces/batch/pods/" + pod + "/eviction");
      CHECK(e["deleteOptions"]["preconditions"]["uid"] == "uid-" + pod);
      evictions.emplace_back(pod, dry);
      if (dry && pod == refuse_dry_run)
        return replyFromHttp(
            429, R"({"kind":"Status","code":429,"message":"would violate the disruption budget"})");
      return replyFromHttp(201, R"({"kind":"Status","status":"Success"})");
    });
  }
  // Events posted: (reason, namespace/name, message).
  std::vector<std::tuple<std::string, std::string, std::string>> posted() {
    events.flush();
    std::vector<std::tuple<std::string, std::string, std::string>> out;
    for (const auto& c : api.calls()) {
      if (c.path.find("/events") == std::string::npos) continue;
      json e = json::parse(c.body);
      out.emplace_back(e["reason"],
                       e["involvedObject"]["namespace"].get<std::string>() + "/" +
                           e["involvedObject"]["name"].get<std::string>(),
                       e["message"]);
    }
    return out;
  }
};

}  // namespace

TEST_CASE("defrag advisor: which pending pods are planned for", "[kube][defrag]") {
  World w;
  const auto old = w.now - std::chrono::minutes(5);
  w.pods = {{"u1", pending("big", 8, old)},
            {"u2", pending("small", 2, old)},                               // below minGpus
            {"u3", pending("fresh", 8, w.now - std::chrono::seconds(10))},  // not pending long enough
            {"u4", pending("g-0", 1, old, "ml/g")},                         // a gang: planned once, for both
            {"u5", pending("g-1", 1, w.now - std::chrono::seconds(1), "ml/g")}};
  w.pods.push_back({"u6", pending("noreq", 8, old)});
  w.pods.back().second.request.reset();  // its annotations did not parse
  troupe::kube::DefragOptions o;
  troupe::kube::DefragAdvisor advisor = w.make(o);
  const auto round = advisor.runOnce(w.now);
  CHECK(round.asks == 2);
  REQUIRE(w.asked.size() == 2);
  std::map<std::string, int> members;
  for (const auto& a : w.asked) members[a.key] = a.members;
  CHECK(members == std::map<std::string, int>{{"ml/big", 1}, {"ml/g", 2}});
  // Every pending pod is pinned: none of them is a running pod to move.
  CHECK(w.pinned_seen == std::set<std::string>{"u1", "u2", "u3", "u4", "u5", "u6"});

  SECTION("disabled: nothing") {
    o.enabled = false;
    w.asked.clear();
    CHECK(w.make(o).runOnce(w.now).asks == 0);
    CHECK(w.asked.empty());
  }
}

TEST_CASE("defrag advisor: one DefragAdvice event while the advice is unchanged, nothing evicted",
          "[kube][defrag]") {
  World w;
  w.pods = {{"u1", pending("big", 8, w.now - std::chrono::minutes(5))}};
  troupe::kube::DefragAdvisor advisor = w.make({});
  auto round = advisor.runOnce(w.now);
  CHECK(round.plans == 1);
  CHECK(round.gpus == 8);
  CHECK(round.moves == 1);
  CHECK(round.events == 1);
  CHECK(advisor.runOnce(w.now).events == 0);  // the same advice: not told again
  auto events = w.posted();
  REQUIRE(events.size() == 1);
  CHECK(std::get<0>(events[0]) == "DefragAdvice");
  CHECK(std::get<1>(events[0]) == "ml/big");
  CHECK(std::get<2>(events[0]) ==
        "moving pod batch/small from node n1 to node n9 would free 8 connected GPUs on n1 for this pod; "
        "Troupe did not move them (defrag.evict is off)");
  CHECK(w.evictions.empty());
  // Different advice is told; advice that went away and came back is told again.
  w.advice = planFreeing("n2", {"other"});
  CHECK(advisor.runOnce(w.now).events == 1);
  w.advice = troupe::sched::DefragAdvice{};
  CHECK(advisor.runOnce(w.now).plans == 0);
  w.advice = planFreeing("n2", {"other"});
  CHECK(advisor.runOnce(w.now).events == 1);
  CHECK(w.evictions.empty());
}

TEST_CASE("defrag advisor: with evict, dry runs first, then the evictions", "[kube][defrag]") {
  World w;
  w.pods = {{"u1", pending("big", 8, w.now - std::chrono::minutes(5))}};
  w.advice = planFreeing("n1", {"a", "b"});
  troupe::kube::DefragOptions o;
  o.evict = true;

  SECTION("all pass") {
    troupe::kube::DefragAdvisor advisor = w.make(o);
    CHECK(advisor.runOnce(w.now).evicted == 2);
    CHECK(w.evictions ==
          std::vector<std::pair<std::string, bool>>{{"a", true}, {"b", true}, {"a", false}, {"b", false}});
    std::multimap<std::string, std::string> by_reason;
    for (const auto& [reason, pod, message] : w.posted()) by_reason.emplace(reason, pod);
    CHECK(by_reason.count("Defragmented") == 2);
    REQUIRE(by_reason.count("DefragAdvice") == 1);
    CHECK(by_reason.find("DefragAdvice")->second == "ml/big");
    // Not again for the same pod within the cooldown.
    w.evictions.clear();
    CHECK(advisor.runOnce(w.now + std::chrono::seconds(30)).evicted == 0);
    CHECK(w.evictions.empty());
    CHECK(advisor.runOnce(w.now + troupe::kube::DefragAdvisor::kEvictCooldown + std::chrono::seconds(31))
              .evicted == 2);
  }
  SECTION("a PodDisruptionBudget refusing one dry run evicts nobody") {
    w.refuse_dry_run = "b";
    troupe::kube::DefragAdvisor advisor = w.make(o);
    CHECK(advisor.runOnce(w.now).evicted == 0);
    CHECK(w.evictions == std::vector<std::pair<std::string, bool>>{{"a", true}, {"b", true}});
    const auto events = w.posted();
    REQUIRE(events.size() == 1);
    CHECK(std::get<0>(events[0]) == "DefragBlocked");
    CHECK(std::get<1>(events[0]) == "ml/big");
    CHECK_THAT(std::get<2>(events[0]), Catch::Contains("PodDisruptionBudget") && Catch::Contains("batch/b"));
  }
}
