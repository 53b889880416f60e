// Queues in Kubernetes mode against a fake API server: the Queue and Namespace watches feed the
// core's queues, the status writer's merge PATCH (conditions keep their transition times), the
// reclaimer's dry-run-then-evict (a PodDisruptionBudget's 429 on a dry run evicts nobody), and
// the leader Lease check.
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <set>
#include <sstream>

#include "adapters/common/logger.h"
#include "adapters/kube/bind/events.h"
#include "adapters/kube/queues/queue_status.h"
#include "adapters/kube/queues/queue_sync.h"
#include "adapters/kube/queues/reclaimer.h"
#include "adapters/kube/replica/leader_lease.h"
#include "adapters/kube/watch/watcher.h"
#include "support/kube_test_support.h"

namespace {

using nlohmann::json;
using troupe::kube::ApiReply;
using troupe::kube::replyFromHttp;
using troupe::kube::StopSignal;
using troupe::kube::WatchEventType;
using troupe::kube::testing::FakeApi;
using troupe::kube::testing::toKube;
using troupe::sched::QueueStatus;
using troupe::sched::QueueTree;

json queueJson(const std::string& name, const json& spec) {
  return {{"apiVersion", "troupe.dev/v1alpha1"},
          {"kind", "Queue"},
          {"metadata", {{"name", name}, {"resourceVersion", "1"}}},
          {"spec", spec}};
}

std::string listOf(const std::vector<json>& items, const std::string& rv) {
  return json{{"kind", "QueueList"}, {"metadata", {{"resourceVersion", rv}}}, {"items", items}}.dump();
}

struct Sink {
  std::vector<QueueTree> trees;
  std::vector<std::pair<std::string, std::string>> namespaces;
  std::vector<std::string> changed;  // membership changes: the pods are listed again
  troupe::kube::QueueSink sink() {
    return {[this](QueueTree t) { trees.push_back(std::move(t)); },
            [this](const std::string& ns, const std::string& q) { namespaces.emplace_back(ns, q); },
            [this](const std::string& why) { changed.push_back(why); }};
  }
};

struct Logs {
  std::ostringstream out;
  troupe::adapters::Logger logger{out, troupe::adapters::LogLevel::kDebug};
  size_t count(const std::string& text) const {
    size_t n = 0;
    const std::string s = out.str();
    for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + 1)) ++n;
    return n;
  }
};

}  // namespace

TEST_CASE("queue watch: the listed Queues become the tree, events rebuild it", "[kube][queue]") {
  Logs logs;
  Sink sink;
  FakeApi api;
  troupe::kube::QueueSync sync(sink.sink(), logs.logger, "default");
  api.queueList({200, listOf({queueJson("research", {{"weight", 2}, {"guaranteed", {{"gpus", 8}}}}),
                              queueJson("vision", {{"parent", "research"}, {"limit", {{"gpus", "2.5"}}}}),
                              queueJson("broken", {{"weight", -1}})},
                             "10")});
  api.queueWatch({200,
                  {json{{"type", "MODIFIED"}, {"object", queueJson("research", {{"weight", 3}})}}.dump(),
                   json{{"type", "DELETED"}, {"object", queueJson("vision", json::object())}}.dump()}});
  troupe::kube::WatchConfig config;
  config.name = "queues";
  config.path = troupe::kube::kQueuesPath;
  troupe::kube::Watcher watcher(api, config, sync.queueHandler(), logs.logger, [] { return 0.0; });
  StopSignal stop;
  REQUIRE(watcher.step(stop));  // the list: one tree, at its end
  CHECK(sync.queuesListed());
  REQUIRE(sink.trees.size() == 1);
  const QueueTree& listed = sink.trees[0];
  REQUIRE(listed.find("research") != nullptr);
  CHECK(listed.find("research")->weight == 2);
  CHECK(listed.find("research")->guaranteed.milli == 8000);
  REQUIRE(listed.find("vision") != nullptr);
  CHECK(listed.find("vision")->limit.milli == 2500);
  CHECK(listed.lineage("vision") == std::vector<std::string>{"vision", "research"});
  REQUIRE(listed.invalid().count("broken"));
  CHECK_THAT(listed.invalid().at("broken"), Catch::StartsWith("queue broken: spec.weight is -1"));
  CHECK(logs.count("queue is invalid") == 1);
  CHECK(sync.queueObjects() == std::set<std::string>{"broken", "research", "vision"});
  // New queue names: pods may belong elsewhere now, so they are listed again.
  CHECK(sink.changed == std::vector<std::string>{"queues"});

  REQUIRE(watcher.step(stop));  // the watch: each event rebuilds
  REQUIRE(sink.trees.size() == 3);
  CHECK(sink.trees[1].find("research")->weight == 3);
  CHECK(sink.trees[2].find("vision") == nullptr);
  CHECK(sink.trees[2].find("research") != nullptr);
  CHECK(sync.queueObjects() == std::set<std::string>{"broken", "research"});
  CHECK(logs.count("queue is invalid") == 1);  // the same error is not logged again
  // A changed weight keeps every pod where it is; a deleted queue does not.
  CHECK(sink.changed == std::vector<std::string>{"queues", "queues"});
}

TEST_CASE("queue watch: without the CRD (404) the file's queues stay, logged once", "[kube][queue]") {
  Logs logs;
  Sink sink;
  FakeApi api;
  troupe::kube::QueueSync sync(sink.sink(), logs.logger, "default");
  troupe::kube::WatchConfig config;
  config.name = "queues";
  config.path = troupe::kube::kQueuesPath;
  config.missing_hint = "install the Queue CRD";
  troupe::kube::Watcher watcher(api, config, sync.queueHandler(), logs.logger, [] { return 0.0; });
  StopSignal stop;
  for (int i = 0; i < 3; ++i) {
    api.queueList(
        {404,
         R"({"kind":"Status","code":404,"message":"the server could not find the requested resource"})"});
    CHECK_FALSE(watcher.step(stop));
  }
  CHECK(sink.trees.empty());  // nothing replaced the config file's queues
  CHECK_FALSE(sync.queuesListed());
  CHECK(logs.count("resource not installed") == 1);
  CHECK(logs.count("install the Queue CRD") == 1);
  // Installed later: the next list replaces them, an empty list included.
  api.queueList({200, listOf({}, "5")});
  CHECK(watcher.step(stop));
  REQUIRE(sink.trees.size() == 1);
  CHECK(sink.trees[0].empty());
  CHECK(sync.queuesListed());
}

TEST_CASE("namespace watch: troupe.dev/default-queue", "[kube][queue]") {
  Logs logs;
  Sink sink;
  troupe::kube::QueueSync sync(sink.sink(), logs.logger, "default");
  auto ns = [](const std::string& name, const std::string& queue) {
    json meta = {{"name", name}};
    if (!queue.empty()) meta["annotations"] = {{"troupe.dev/default-queue", queue}};
    return toKube(json{{"metadata", meta}});
  };
  auto& h = sync.namespaceHandler();
  h.beginList();
  h.listed(ns("ml", "research"));
  h.listed(ns("web", ""));
  h.listed(ns("cv", "vision"));
  h.endList();
  CHECK(sink.namespaces ==
        std::vector<std::pair<std::string, std::string>>{{"ml", "research"}, {"cv", "vision"}});
  CHECK(sink.changed.size() == 2);  // each one lists the pods again (the watcher coalesces them)
  sink.namespaces.clear();
  sink.changed.clear();
  h.event(WatchEventType::kModified, ns("ml", "research"));  // unchanged: nothing
  h.event(WatchEventType::kModified, ns("ml", "batch"));
  h.event(WatchEventType::kModified, ns("cv", ""));   // the annotation removed
  h.event(WatchEventType::kModified, ns("web", ""));  // never had one: nothing
  CHECK(sink.namespaces == std::vector<std::pair<std::string, std::string>>{{"ml", "batch"}, {"cv", ""}});
  CHECK(sink.changed == std::vector<std::string>{"namespace-queue", "namespace-queue"});
  sink.namespaces.clear();
  // A relist that no longer shows ml: its default is dropped.
  h.beginList();
  h.listed(ns("web", ""));
  h.endList();
  CHECK(sink.namespaces == std::vector<std::pair<std::string, std::string>>{{"ml", ""}});
  sink.namespaces.clear();
  h.event(WatchEventType::kAdded, ns("cv", "vision"));
  h.event(WatchEventType::kDeleted, ns("cv", "vision"));
  CHECK(sink.namespaces == std::vector<std::pair<std::string, std::string>>{{"cv", "vision"}, {"cv", ""}});
}

namespace {

QueueStatus statusOf(const std::string& name) {
  QueueStatus s;
  s.spec.name = name;
  s.spec.guaranteed.milli = 8000;
  s.allocated_milli = 2500;
  s.allocated = {{"NVIDIA-H100-80GB-HBM3", 2500}};
  s.pending_milli = 4000;
  s.pending = {{"NVIDIA-H100-80GB-HBM3", 4000}};
  s.pending_pods = 2;
  s.running_pods = 3;
  s.fair_share.total_milli = 16000;
  s.fair_share.share = {{"NVIDIA-H100-80GB-HBM3", 16000}};
  s.dominant_share = 0.0390625;
  s.below_guaranteed = true;
  s.explanation = "fair share 16 GPUs: weight 2 of 4";
  return s;
}

struct StatusWorld {
  Logs logs;
  FakeApi api;
  std::vector<QueueStatus> statuses = {statusOf("team-a"), statusOf("implicit")};
  std::chrono::system_clock::time_point wall =
      std::chrono::system_clock::from_time_t(1764660000);  // 2025-12-02
  std::vector<json> patches;
  troupe::kube::QueueStatusWriter writer{api, [this] { return statuses; }, logs.logger,
                                         [] { return std::set<std::string>{"team-a"}; },
                                         [this] { return wall; }};
  StatusWorld() {
    api.setHook([this](const std::string& method, const std::string& path,
                       const std::string& body) -> std::optional<ApiReply> {
      if (method == "GET" && path == "/apis/troupe.dev/v1alpha1/queues/team-a") {
        // What the object shows from an earlier run: Valid since long ago.
        return replyFromHttp(
            200, json{{"metadata", {{"name", "team-a"}}},
                      {"status",
                       {{"conditions", json::array({{{"type", "Valid"},
                                                     {"status", "True"},
                                                     {"reason", "Valid"},
                                                     {"lastTransitionTime", "2025-01-01T00:00:00Z"}}})}}}}
                     .dump());
      }
      if (method == "PATCH") {
        patches.push_back(json::parse(body));
        return replyFromHttp(200, body);
      }
      return std::nullopt;
    });
  }
  const json* condition(const json& patch, const std::string& type) {
    for (const json& c : patch["status"]["conditions"]) {
      if (c["type"] == type) return &c;
    }
    return nullptr;
  }
};

}  // namespace

TEST_CASE("queue status: a merge PATCH of the status subresource, only when it changed", "[kube][queue]") {
  StatusWorld w;
  CHECK(w.writer.writeOnce() == 1);  // the implicit queue has no object: no status
  REQUIRE(w.patches.size() == 1);
  CHECK(w.api.count("PATCH", "/apis/troupe.dev/v1alpha1/queues/team-a/status") == 1);
  const json& st = w.patches[0]["status"];
  // The CRD's int-or-string: a fraction as a string, whole GPUs as an integer.
  CHECK(st["allocated"]["gpus"] == "2.5");
  CHECK(st["allocated"]["products"]["NVIDIA-H100-80GB-HBM3"] == "2.5");
  CHECK(st["pending"]["gpus"] == 4);
  CHECK(st["pending"]["gpus"].is_number_integer());
  CHECK(st["pending"]["pods"] == 2);
  CHECK(st["fairShare"]["gpus"] == 16);
  CHECK(st["dominantShare"] == 0.0391);
  CHECK(st["running"] == 3);
  CHECK(st["explanation"] == "fair share 16 GPUs: weight 2 of 4");
  const json* valid = w.condition(w.patches[0], "Valid");
  REQUIRE(valid);
  CHECK((*valid)["status"] == "True");
  CHECK((*valid)["lastTransitionTime"] == "2025-01-01T00:00:00Z");  // kept from the object
  const json* below = w.condition(w.patches[0], "BelowGuaranteed");
  REQUIRE(below);
  CHECK((*below)["status"] == "True");
  CHECK((*below)["lastTransitionTime"] == "2025-12-02T07:20:00Z");
  CHECK_THAT((*below)["message"].get<std::string>(), Catch::Contains("holds 2.5 GPUs of 8 guaranteed"));
  const json* above = w.condition(w.patches[0], "AboveFairShare");
  REQUIRE(above);
  CHECK((*above)["status"] == "False");

  // Nothing changed: no write.
  w.wall += std::chrono::minutes(1);
  CHECK(w.writer.writeOnce() == 0);
  CHECK(w.patches.size() == 1);

  // The queue gets its guarantee: BelowGuaranteed turns False now; the others keep their times.
  w.statuses[0].below_guaranteed = false;
  w.statuses[0].allocated_milli = 8000;
  CHECK(w.writer.writeOnce() == 1);
  REQUIRE(w.patches.size() == 2);
  below = w.condition(w.patches[1], "BelowGuaranteed");
  CHECK((*below)["status"] == "False");
  CHECK((*below)["reason"] == "GuaranteeMet");
  CHECK((*below)["lastTransitionTime"] == "2025-12-02T07:21:00Z");
  CHECK((*w.condition(w.patches[1], "Valid"))["lastTransitionTime"] == "2025-01-01T00:00:00Z");
  CHECK(w.api.count("GET", "/queues/team-a") == 1);  // read once, then remembered
}

TEST_CASE("queue status: an invalid queue is Valid=False with its error", "[kube][queue]") {
  StatusWorld w;
  w.statuses[0] = QueueStatus{};
  w.statuses[0].spec.name = "team-a";
  w.statuses[0].invalid = "queue team-a: spec.weight is -1: must be a positive number";
  CHECK(w.writer.writeOnce() == 1);
  const json* valid = w.condition(w.patches[0], "Valid");
  REQUIRE(valid);
  CHECK((*valid)["status"] == "False");
  CHECK((*valid)["reason"] == "Invalid");
  CHECK((*valid)["message"] == "queue team-a: spec.weight is -1: must be a positive number");
  CHECK((*valid)["lastTransitionTime"] == "2025-12-02T07:20:00Z");  // it was True before
  CHECK(w.patches[0]["status"]["explanation"] ==
        "queue team-a: spec.weight is -1: must be a positive number");
}

namespace {

troupe::sched::ReclaimPlan planOf(std::vector<std::string> victims) {
  troupe::sched::ReclaimPlan plan;
  plan.queue = "research";
  plan.for_key = "ml/train-0";
  for (const std::string& v : victims) {
    troupe::sched::ReclaimVictim victim;
    victim.uid = "uid-" + v;
    victim.key = "batch/" + v;
    victim.queue = "scavenger";
    victim.gang = "batch/g";
    victim.node = "n1";
    victim.milli = 4000;
    plan.victims.push_back(victim);
  }
  plan.freed_milli = 4000 * static_cast<int64_t>(victims.size());
  plan.reason = "queue research is below its guaranteed 8 GPUs; scavenger is above its fair share";
  return plan;
}

struct ReclaimWorld {
  explicit ReclaimWorld(size_t calls_at_once = 1) : in_flight(calls_at_once) { hookEvictions(); }
  size_t in_flight;  // 1: the calls in a known order (the hook may CHECK on its thread)
  Logs logs;
  FakeApi api;
  troupe::kube::EventRecorder events{api, logs.logger, troupe::kube::EventOptions{}};
  std::optional<troupe::sched::ReclaimPlan> plan;
  struct Finished {
    bool evicted;
    std::string why;
  };
  std::vector<Finished> finished;
  std::vector<std::pair<std::string, bool>> evictions;  // pod, dry run
  std::string refuse_dry_run;                           // this pod's dry run gets a 429
  troupe::kube::Reclaimer reclaimer{
      api,
      troupe::kube::ReclaimCore{
          [this] { return std::exchange(plan, std::nullopt); },
          [this](const troupe::sched::ReclaimPlan&, bool evicted, const std::string& why) {
            finished.push_back({evicted, why});
          }},
      &events,
      logs.logger,
      [](const std::string& key) {
        return key == "ml/train-0" ? std::vector<troupe::kube::PodRef>{{"ml", "train-0", "uid-train-0"}}
                                   : std::vector<troupe::kube::PodRef>{};
      },
      in_flight};
  void hookEvictions() {
    api.setHook([this](const std::string& method, const std::string& path,
                       const std::string& body) -> std::optional<ApiReply> {
      if (method != "POST" || path.find("/eviction") == std::string::npos) return std::nullopt;
      json e = json::parse(body);
      const std::string pod = e["metadata"]["name"];
      const bool dry = e["deleteOptions"].contains("dryRun");
      CHECK(path == "/api/v1/namespaces/batch/pods/" + pod + "/eviction");
      CHECK(e["apiVersion"] == "policy/v1");
      CHECK(e["kind"] == "Eviction");
      CHECK(e["deleteOptions"]["preconditions"]["uid"] == "uid-" + pod);
      if (dry) CHECK(e["deleteOptions"]["dryRun"] == json::array({"All"}));
      evictions.emplace_back(pod, dry);
      if (dry && pod == refuse_dry_run) {
        return replyFromHttp(
            429,
            R"({"kind":"Status","code":429,"message":"Cannot evict pod as it would violate the pod's disruption budget."})");
      }
      return replyFromHttp(201, R"({"kind":"Status","status":"Success"})");
    });
  }
  // Events posted: reason -> pods.
  std::multimap<std::string, std::string> posted() {
    events.flush();
    std::multimap<std::string, std::string> out;
    for (const auto& c : api.calls()) {
      if (c.path.find("/events") == std::string::npos) continue;
      json e = json::parse(c.body);
      out.emplace(e["reason"], e["involvedObject"]["namespace"].get<std::string>() + "/" +
                                   e["involvedObject"]["name"].get<std::string>());
    }
    return out;
  }
};

}  // namespace

TEST_CASE("reclaimer: every dry run first, then the evictions, with Events", "[kube][queue][reclaim]") {
  ReclaimWorld w;
  CHECK(w.reclaimer.runOnce() == troupe::kube::Reclaimer::Outcome::kNothing);
  w.plan = planOf({"w0", "w1"});
  CHECK(w.reclaimer.runOnce() == troupe::kube::Reclaimer::Outcome::kEvicted);
  CHECK(w.evictions ==
        std::vector<std::pair<std::string, bool>>{{"w0", true}, {"w1", true}, {"w0", false}, {"w1", false}});
  REQUIRE(w.finished.size() == 1);
  CHECK(w.finished[0].evicted);
  const auto events = w.posted();
  CHECK(events.count("Reclaimed") == 2);
  CHECK(events.count("ReclaimStarted") == 1);
  CHECK(events.find("ReclaimStarted")->second == "ml/train-0");
  CHECK(events.count("ReclaimBlocked") == 0);
  CHECK(w.reclaimer.stats().evicted_pods == 2);
}

TEST_CASE("reclaimer: a PodDisruptionBudget refusing one dry run evicts nobody", "[kube][queue][reclaim]") {
  ReclaimWorld w;
  w.refuse_dry_run = "w1";
  w.plan = planOf({"w0", "w1", "w2"});
  CHECK(w.reclaimer.runOnce() == troupe::kube::Reclaimer::Outcome::kBlocked);
  // Every dry run is sent (they go out together), w1's was refused: no real eviction at all.
  CHECK(w.evictions == std::vector<std::pair<std::string, bool>>{{"w0", true}, {"w1", true}, {"w2", true}});
  REQUIRE(w.finished.size() == 1);
  CHECK_FALSE(w.finished[0].evicted);
  CHECK_THAT(w.finished[0].why, Catch::Contains("PodDisruptionBudget") && Catch::Contains("batch/w1"));
  const auto events = w.posted();
  CHECK(events.count("Reclaimed") == 0);
  CHECK(events.count("ReclaimStarted") == 0);
  REQUIRE(events.count("ReclaimBlocked") == 1);
  CHECK(events.find("ReclaimBlocked")->second == "ml/train-0");
}

TEST_CASE("reclaimer: a round's evictions go out together, at most max_in_flight at once",
          "[kube][queue][reclaim]") {
  constexpr size_t kInFlight = 4;
  ReclaimWorld w(kInFlight);
  std::mutex mu;
  std::condition_variable cv;
  size_t now = 0, most = 0;
  std::vector<std::pair<std::string, bool>> calls;
  // No CHECK here: the hook runs on the reclaimer's workers. Each call waits (briefly) for a
  // fellow so that calls do overlap when they can.
  w.api.setHook([&](const std::string& method, const std::string& path,
                    const std::string& body) -> std::optional<ApiReply> {
    if (method != "POST" || path.find("/eviction") == std::string::npos) return std::nullopt;
    json e = json::parse(body);
    std::unique_lock lock(mu);
    calls.emplace_back(e["metadata"]["name"], e["deleteOptions"].contains("dryRun"));
    most = std::max(most, ++now);
    cv.notify_all();
    cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return now >= 2; });
    --now;
    return replyFromHttp(201, R"({"kind":"Status","status":"Success"})");
  });
  std::vector<std::string> names;
  for (int i = 0; i < 24; ++i) names.push_back("w" + std::to_string(i));
  w.plan = planOf(names);
  CHECK(w.reclaimer.runOnce() == troupe::kube::Reclaimer::Outcome::kEvicted);
  CHECK(most <= kInFlight);
  CHECK(most >= 2);
  REQUIRE(calls.size() == 48);
  // Every dry run before any real eviction, each victim once in each.
  std::multiset<std::string> dry, real;
  for (size_t i = 0; i < calls.size(); ++i)
    (i < 24 ? dry : real).insert(calls[i].first + (calls[i].second ? "?" : ""));
  std::multiset<std::string> want_dry, want_real;
  for (const std::string& n : names) {
    want_dry.insert(n + "?");
    want_real.insert(n);
  }
  CHECK(dry == want_dry);
  CHECK(real == want_real);
  CHECK(w.reclaimer.stats().evicted_pods == 24);
  CHECK(w.posted().count("Reclaimed") == 24);
}

TEST_CASE("reclaimer: every evicted pod's Reclaimed event gets past the event rate limit",
          "[kube][queue][reclaim]") {
  // A burst of 2: rate-limited events beyond it are dropped, a round's Reclaimed events are not.
  Logs logs;
  FakeApi api;
  troupe::kube::EventOptions options;
  options.burst = 2;
  options.rate_per_second = 0.001;
  troupe::kube::EventRecorder events{api, logs.logger, options};
  int queued = 0, limited = 0;
  for (int i = 0; i < 5; ++i) {
    const std::string n = std::to_string(i);
    queued += events.podEvent({"batch", "w" + n, "uid-w" + n}, "Normal", "Reclaimed", "why", false) ? 1 : 0;
    limited += events.podEvent({"ml", "p" + n, "uid-p" + n}, "Normal", "ReclaimStarted", "why") ? 1 : 0;
  }
  CHECK(queued == 5);
  CHECK(limited == 2);
  // The per-pod interval still holds: the same pod's same reason is not repeated.
  CHECK_FALSE(events.podEvent({"batch", "w0", "uid-w0"}, "Normal", "Reclaimed", "why", false));
}

TEST_CASE("reclaimer: a victim already gone counts as evicted", "[kube][queue][reclaim]") {
  ReclaimWorld w;
  w.api.setHook(
      [](const std::string& method, const std::string& path, const std::string&) -> std::optional<ApiReply> {
        if (method == "POST" && path.find("/eviction") != std::string::npos)
          return replyFromHttp(404, R"({"message":"pods \"w0\" not found"})");
        return std::nullopt;
      });
  w.plan = planOf({"w0"});
  CHECK(w.reclaimer.runOnce() == troupe::kube::Reclaimer::Outcome::kEvicted);
  REQUIRE(w.finished.size() == 1);
  CHECK(w.finished[0].evicted);
  CHECK(w.posted().count("Reclaimed") == 0);  // nothing was evicted by Troupe
}

TEST_CASE("leader lease: only the replica whose host holds kube-scheduler's Lease is active",
          "[kube][queue]") {
  using troupe::kube::holdsLease;
  CHECK(holdsLease("troupe-7d9f-abcde_3f1c2a9e-uuid", "troupe-7d9f-abcde"));
  CHECK(holdsLease("troupe-7d9f-abcde", "troupe-7d9f-abcde"));
  CHECK_FALSE(holdsLease("troupe-7d9f-abcdef_uuid", "troupe-7d9f-abcde"));
  CHECK_FALSE(holdsLease("other_uuid", "troupe-7d9f-abcde"));
  CHECK_FALSE(holdsLease("", "troupe"));
  CHECK_FALSE(holdsLease("troupe_x", ""));
  REQUIRE(troupe::kube::parseLeaseRef("kube-system/troupe-scheduler").isOk());
  CHECK(troupe::kube::parseLeaseRef("kube-system/troupe-scheduler").value().name == "troupe-scheduler");
  for (const char* bad : {"", "lease", "/x", "x/", "a/b/c"}) {
    INFO(bad);
    CHECK_THAT(troupe::kube::parseLeaseRef(bad).status().message(), Catch::Contains("NAMESPACE/NAME"));
  }

  Logs logs;
  FakeApi api;
  std::string holder = "host-a_1234";
  int status = 200;
  api.setHook(
      [&](const std::string& method, const std::string& path, const std::string&) -> std::optional<ApiReply> {
        if (method == "GET" &&
            path == "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/troupe-scheduler") {
          if (status != 200) return replyFromHttp(status, R"({"message":"scripted"})");
          return replyFromHttp(200, json{{"spec", {{"holderIdentity", holder}}}}.dump());
        }
        return std::nullopt;
      });
  auto t = std::chrono::steady_clock::time_point{};
  troupe::kube::LeaderCheck a(api, logs.logger, troupe::kube::LeaseRef{"kube-system", "troupe-scheduler"},
                              "host-a", std::chrono::seconds(15), [&] { return t; });
  troupe::kube::LeaderCheck b(api, logs.logger, troupe::kube::LeaseRef{"kube-system", "troupe-scheduler"},
                              "host-b", std::chrono::seconds(15), [&] { return t; });
  CHECK(a.refresh());
  CHECK_FALSE(b.refresh());
  holder = "host-b_5678";  // failover
  CHECK_FALSE(a.refresh());
  CHECK(b.refresh());
  // The Lease cannot be read: the last answer holds for a while, then b stands by too.
  status = 500;
  t += std::chrono::seconds(5);
  CHECK(b.refresh());
  t += std::chrono::seconds(15);
  CHECK_FALSE(b.refresh());
  CHECK(logs.count("cannot read the leader Lease") == 1);
  // Without a Lease (one replica): always active, nothing read.
  troupe::kube::LeaderCheck single(api, logs.logger, std::nullopt, "host-c");
  const size_t calls = api.calls().size();
  CHECK(single.refresh());
  CHECK(api.calls().size() == calls);
}

TEST_CASE("pod timestamps: creationTimestamp and status.startTime", "[kube][queue]") {
  using troupe::kube::parseApiTime;
  auto t = parseApiTime("2025-12-02T07:20:00Z");
  REQUIRE(t);
  CHECK(std::chrono::system_clock::to_time_t(*t) == 1764660000);
  CHECK(troupe::kube::formatApiTime(*t) == "2025-12-02T07:20:00Z");
  CHECK(parseApiTime("2025-12-02T08:20:00+01:00") == t);
  CHECK(*parseApiTime("2025-12-02T07:20:00.5Z") - *t == std::chrono::milliseconds(500));
  for (const char* bad : {"", "yesterday", "2025-12-02", "2025-12-02T07:20:00", "2025-13-02T07:20:00Z",
                          "2025-12-02T07:20:00Zjunk"}) {
    INFO(bad);
    CHECK_FALSE(parseApiTime(bad));
  }
  json pod = troupe::kube::testing::podJson("a", 1, "n1");
  pod["metadata"]["creationTimestamp"] = "2025-12-02T07:20:00Z";
  pod["status"]["startTime"] = "2025-12-02T07:21:00Z";
  auto v = troupe::kube::decodePod(toKube(pod));
  REQUIRE(v.isOk());
  REQUIRE(v.value().created);
  REQUIRE(v.value().started);
  CHECK(*v.value().started - *v.value().created == std::chrono::minutes(1));
  auto bare = troupe::kube::decodePod(toKube(troupe::kube::testing::podJson("b", 1)));
  REQUIRE(bare.isOk());
  CHECK_FALSE(bare.value().created);
  CHECK_FALSE(bare.value().started);
}
