// Binding through a fake API server: one Binding that carries the annotation, idempotent
// retries, concurrent binds, what stays held after each kind of failure, and the pods Troupe
// refuses to bind (other schedulers' pods, pods it did not filter onto the node).
#include <catch2/catch.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "adapters/common/logger.h"
#include "adapters/kube/bind/binder.h"
#include "adapters/kube/bind/events.h"
#include "adapters/kube/watch/cluster_sync.h"
#include "support/fixtures.h"
#include "support/kube_test_support.h"
#include "troupe/model/gpu_selection.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using nlohmann::json;
using troupe::Code;
using troupe::kube::ApiErrorKind;
using troupe::kube::ApiReply;
using troupe::kube::Binder;
using troupe::kube::ClusterSync;
using troupe::kube::EventRecorder;
using troupe::kube::replyFromFailure;
using troupe::kube::replyFromHttp;
using troupe::kube::testing::FakeApi;
using troupe::kube::testing::podJson;
using troupe::kube::testing::toKube;
using troupe::sched::BindRequest;

struct World : troupe::kube::testing::SyncWorld {
  FakeApi api;
  EventRecorder events{api, logger, troupe::kube::EventOptions{}};
  Binder binder;

  explicit World(troupe::kube::BinderOptions options = {})
      : binder(api, scheduler, sync, &events, logger, std::move(options)) {
    for (const char* n : {"n1", "n2"}) REQUIRE(scheduler.upsertNode(troupe::testing::gpuNode(n, 8)).isOk());
  }

  // A pod that exists in the API and passed Troupe's filter, as kube-scheduler would have it.
  BindRequest pod(const std::string& name, int gpus, const std::string& node = "n1", bool filtered = true) {
    api.putPod(podJson(name, gpus));
    if (filtered) {
      troupe::sched::PodFacts f = troupe::testing::gpuPod(name, gpus);
      f.uid = "uid-" + name;
      REQUIRE_FALSE(scheduler.filter(f, {node}).passed.empty());
    }
    return BindRequest{name, "default", "uid-" + name, node};
  }
  std::string annotation(const std::string& name) {
    auto p = api.pod("default", name);
    if (!p || !(*p)["metadata"].contains("annotations")) return "";
    return (*p)["metadata"]["annotations"].value("troupe.dev/gpus", "");
  }
  // What the API server does with a Binding it stores: the node, and its annotations.
  static void storeBinding(json& pod, const std::string& binding_body) {
    json b = json::parse(binding_body);
    pod["spec"]["nodeName"] = b["target"]["name"];
    if (b["metadata"].contains("annotations")) {
      for (auto& [k, v] : b["metadata"]["annotations"].items()) pod["metadata"]["annotations"][k] = v;
    }
  }
  // The pod watch shows the pod as the fake API has it now.
  void watch(const std::string& name) {
    sync.podHandler().event(troupe::kube::WatchEventType::kModified, toKube(*api.pod("default", name)));
  }
  int reads(const std::string& name) { return api.count("GET", "/pods/" + name); }
  std::string nodeOf(const std::string& name) {
    auto p = api.pod("default", name);
    return p && (*p)["spec"].contains("nodeName") ? (*p)["spec"]["nodeName"].get<std::string>() : "";
  }
};

}  // namespace

TEST_CASE("binder: one Binding carries the annotation, then an Event", "[kube][binder]") {
  World w;
  BindRequest b = w.pod("a", 4);
  auto r = w.binder.bind(b);
  INFO(r.status().message());
  REQUIRE(r.isOk());
  CHECK(r.value().gpus.size() == 4);
  CHECK(w.nodeOf("a") == "n1");
  CHECK(w.annotation("a") == troupe::kube::formatGpus(r.value().gpus));
  CHECK(w.scheduler.allocationOf("uid-a")->gpus == r.value().gpus);
  // One write binds the pod: the Binding, with troupe.dev/gpus in its metadata.annotations
  // (the API server copies them onto the pod) and the pod's uid as precondition. No PATCH.
  std::vector<troupe::kube::testing::FakeApi::Call> writes;
  for (const auto& c : w.api.calls()) {
    if (c.method != "GET" && c.path.find("/events") == std::string::npos) writes.push_back(c);
  }
  REQUIRE(writes.size() == 1);
  CHECK(writes[0].method == "POST");
  CHECK(writes[0].path == "/api/v1/namespaces/default/pods/a/binding");
  json binding = json::parse(writes[0].body);
  CHECK(binding["kind"] == "Binding");
  CHECK(binding["metadata"]["uid"] == "uid-a");
  CHECK(binding["metadata"]["annotations"]["troupe.dev/gpus"] == troupe::kube::formatGpus(r.value().gpus));
  CHECK(binding["target"]["name"] == "n1");
  CHECK(w.api.count("PATCH", "/pods/a") == 0);
  w.events.flush();
  CHECK(w.events.posted() == 1);
  bool found = false;
  for (const auto& c : w.api.calls()) {
    if (c.path.find("/events") != std::string::npos) {
      json e = json::parse(c.body);
      CHECK(e["reason"] == "GPUsAssigned");
      CHECK(e["involvedObject"]["uid"] == "uid-a");
      CHECK(e["message"].get<std::string>().find("on node n1") != std::string::npos);
      found = true;
    }
  }
  CHECK(found);
  // The watch's echo of the binding changes nothing.
  w.sync.applyPod(troupe::kube::decodePod(toKube(*w.api.pod("default", "a"))).value());
  CHECK(w.scheduler.allocationOf("uid-a")->gpus == r.value().gpus);
}

TEST_CASE("binder: a retried bind is idempotent", "[kube][binder]") {
  World w;
  BindRequest b = w.pod("a", 2);
  auto first = w.binder.bind(b);
  REQUIRE(first.isOk());
  const int bindings = w.api.count("POST", "/binding");
  auto again = w.binder.bind(b);
  INFO(again.status().message());
  REQUIRE(again.isOk());
  CHECK(again.value().gpus == first.value().gpus);
  CHECK(w.api.count("POST", "/binding") == bindings);  // no second Binding
  // Even after a restart (a fresh core that only knows what the API says).
  World fresh;
  fresh.api.putPod(*w.api.pod("default", "a"));
  auto after = fresh.binder.bind(b);
  REQUIRE(after.isOk());
  CHECK(fresh.scheduler.allocationOf("uid-a")->gpus == first.value().gpus);
  // Bound elsewhere: refused.
  BindRequest elsewhere = b;
  elsewhere.node = "n2";
  auto refused = w.binder.bind(elsewhere);
  REQUIRE_FALSE(refused.isOk());
  CHECK(refused.status().message().find("already bound to node n1") != std::string::npos);
}

TEST_CASE("binder: concurrent binds to one node never share a GPU", "[kube][binder][concurrency]") {
  World w;
  w.binder.start();
  std::vector<BindRequest> args;
  for (int i = 0; i < 8; ++i) args.push_back(w.pod("p" + std::to_string(i), 1));
  std::vector<troupe::Result<troupe::model::Allocation>> results(args.size(),
                                                                 troupe::internalError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < args.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = w.binder.bind(args[i]); });
  }
  for (auto& t : threads) t.join();
  std::set<int> used;
  for (size_t i = 0; i < args.size(); ++i) {
    INFO(results[i].status().message());
    REQUIRE(results[i].isOk());
    for (int g : results[i].value().gpus) CHECK(used.insert(g).second);
    CHECK(w.annotation(args[i].pod_name) == troupe::kube::formatGpus(results[i].value().gpus));
  }
  CHECK(used.size() == 8);
  // The node is full: the ninth fails in Troupe's check, and holds nothing.
  BindRequest ninth = w.pod("p8", 1, "n1", /*filtered=*/false);
  auto r = w.binder.bind(ninth);
  CHECK_FALSE(r.isOk());
  CHECK_FALSE(w.scheduler.allocationOf("uid-p8"));
  w.binder.stop();
}

TEST_CASE("binder: a pod without GPUs gets a Binding without annotations", "[kube][binder]") {
  World w;
  BindRequest b = w.pod("plain", 0);
  auto r = w.binder.bind(b);
  INFO(r.status().message());
  REQUIRE(r.isOk());
  CHECK(w.nodeOf("plain") == "n1");
  CHECK(w.annotation("plain").empty());
  for (const auto& c : w.api.calls()) {
    if (c.path.find("/binding") != std::string::npos)
      CHECK_FALSE(json::parse(c.body)["metadata"].contains("annotations"));
  }
}

TEST_CASE("binder: a pod Troupe has no filter record of (it restarted) is refused, by name",
          "[kube][binder]") {
  // kube-scheduler retries the pod: its next scheduling cycle filters it through Troupe again.
  World w;
  BindRequest b = w.pod("late", 2, "n1", /*filtered=*/false);
  auto r = w.binder.bind(b);
  REQUIRE_FALSE(r.isOk());
  CHECK(r.status().code() == Code::kFailedPrecondition);
  CHECK_THAT(r.status().message(), Catch::Contains("no record of pod default/late") &&
                                       Catch::Contains("kube-scheduler filters the pod again"));
  CHECK(w.api.count("POST", "/binding") == 0);
  CHECK(w.nodeOf("late").empty());
  CHECK_FALSE(w.scheduler.allocationOf("uid-late"));
  // Filtered again, as kube-scheduler's retry does: bound.
  troupe::sched::PodFacts f = troupe::testing::gpuPod("late", 2);
  f.uid = "uid-late";
  REQUIRE(w.scheduler.filter(f, {"n1"}).passed.size() == 1);
  auto again = w.binder.bind(b);
  INFO(again.status().message());
  REQUIRE(again.isOk());
  CHECK(w.nodeOf("late") == "n1");
}

TEST_CASE("binder: /bind is no confused deputy (security review K2)", "[kube][binder][bind-guard]") {
  World w;
  SECTION("a default-scheduler pod with a nodeSelector for another node, never filtered") {
    json victim = podJson("victim", 0);
    victim["spec"]["schedulerName"] = "default-scheduler";
    victim["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "n2"}};
    w.api.putPod(victim);
    auto r = w.binder.bind(BindRequest{"victim", "default", "uid-victim", "n1"});
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Catch::Contains("spec.schedulerName \"default-scheduler\"") &&
                                         Catch::Contains("troupe-scheduler") &&
                                         Catch::Contains("nothing was bound"));
  }
  SECTION("a pod with no schedulerName (the API's default-scheduler), even after a forged filter") {
    json victim = podJson("victim", 0);
    victim["spec"].erase("schedulerName");
    w.api.putPod(victim);
    troupe::sched::PodFacts f = troupe::testing::gpuPod("victim", 0);
    f.uid = "uid-victim";
    REQUIRE(w.scheduler.filter(f, {"n1"}).passed.size() == 1);  // whoever reaches /filter can do this
    auto r = w.binder.bind(BindRequest{"victim", "default", "uid-victim", "n1"});
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Catch::Contains("\"default-scheduler\""));
  }
  SECTION("Troupe's own pod, filtered onto another node") {
    BindRequest b = w.pod("mine", 2, "n2");
    b.node = "n1";
    auto r = w.binder.bind(b);
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(),
               Catch::Contains("node n1 did not pass Troupe's filter for pod default/mine"));
  }
  SECTION("another scheduler's pod, bound to that node already: refused, not taken for a retry") {
    json other = podJson("theirs", 0, "n2");
    other["spec"]["schedulerName"] = "default-scheduler";
    w.api.putPod(other);
    auto r = w.binder.bind(BindRequest{"theirs", "default", "uid-theirs", "n2"});
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Catch::Contains("schedulerName"));
  }
  // Whatever was refused: no Binding sent, nothing held.
  CHECK(w.api.count("POST", "/binding") == 0);
  CHECK_FALSE(w.scheduler.allocationOf("uid-victim"));
  CHECK_FALSE(w.scheduler.allocationOf("uid-mine"));
  CHECK(w.nodeOf("victim").empty());
}

TEST_CASE("binder: the scheduler names it serves are configurable", "[kube][binder][bind-guard]") {
  troupe::kube::BinderOptions options;
  options.scheduler_names = {"gpu-a", "gpu-b"};
  World w(options);
  for (const char* profile : {"gpu-a", "gpu-b", "troupe-scheduler"}) {
    const std::string name = std::string("p-") + profile;
    BindRequest b = w.pod(name, 1);
    json p = *w.api.pod("default", name);
    p["spec"]["schedulerName"] = profile;
    w.api.putPod(p);
    auto r = w.binder.bind(b);
    INFO(profile << ": " << r.status().message());
    CHECK(r.isOk() == (std::string(profile) != "troupe-scheduler"));
  }
}

TEST_CASE("binder: failures leave no GPU held", "[kube][binder]") {
  World w;
  SECTION("the pod is gone") {
    BindRequest b = w.pod("gone", 2);
    w.api.deletePod("default", "gone");
    auto r = w.binder.bind(b);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kNotFound);
    CHECK(r.status().message().find("no longer exists") != std::string::npos);
  }
  SECTION("the pod was replaced by another of the same name") {
    BindRequest b = w.pod("re", 2);
    b.pod_uid = "old-uid";
    auto r = w.binder.bind(b);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().message().find("different pod") != std::string::npos);
    CHECK_FALSE(w.scheduler.allocationOf("old-uid"));
  }
  SECTION("the API server is down (nothing sent)") {
    BindRequest b = w.pod("down", 2);
    w.api.setHook([](const std::string&, const std::string&, const std::string&) -> std::optional<ApiReply> {
      return replyFromFailure(ApiErrorKind::kUnreachable, "connection refused");
    });
    auto r = w.binder.bind(b);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kUnavailable);
    CHECK(r.status().message().find("connection refused") != std::string::npos);
  }
  SECTION("the Binding is forbidden") {
    BindRequest b = w.pod("patch", 2);
    w.api.setHook(
        [](const std::string& m, const std::string& path, const std::string&) -> std::optional<ApiReply> {
          if (m == "POST" && path.find("/binding") != std::string::npos)
            return replyFromHttp(403, R"({"message":"forbidden"})");
          return std::nullopt;
        });
    auto r = w.binder.bind(b);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().message().find("rbac.yaml") != std::string::npos);
    CHECK(w.nodeOf("patch").empty());
    CHECK(w.annotation("patch").empty());
  }
  SECTION("the pod is deleted between the read and the Binding") {
    BindRequest b = w.pod("race", 2);
    w.api.setHook(
        [&w](const std::string& m, const std::string& path, const std::string&) -> std::optional<ApiReply> {
          if (m == "POST" && path.find("/binding") != std::string::npos) w.api.deletePod("default", "race");
          return std::nullopt;
        });
    auto r = w.binder.bind(b);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kNotFound);
  }
  SECTION("someone else bound it meanwhile") {
    BindRequest b = w.pod("taken", 2);
    w.api.setHook(
        [&w](const std::string& m, const std::string& path, const std::string&) -> std::optional<ApiReply> {
          if (m == "POST" && path.find("/binding") != std::string::npos) {
            json p = *w.api.pod("default", "taken");
            p["spec"]["nodeName"] = "n2";  // and no troupe.dev/gpus: not Troupe's Binding
            w.api.putPod(p);
          }
          return std::nullopt;
        });
    auto r = w.binder.bind(b);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().message().find("bound to node n2") != std::string::npos);
    // It is counted where it really is, at unknown indices.
    auto a = w.scheduler.allocationOf("uid-taken");
    REQUIRE(a);
    CHECK(a->node == "n2");
    CHECK(a->unknown_gpus == 2);
    return;
  }
  CHECK(w.scheduler.allocationOf("uid-gone") == std::nullopt);
  CHECK(w.scheduler.allocationOf("uid-re") == std::nullopt);
  CHECK(w.scheduler.allocationOf("uid-down") == std::nullopt);
  CHECK(w.scheduler.allocationOf("uid-patch") == std::nullopt);
  CHECK(w.scheduler.allocationOf("uid-race") == std::nullopt);
  CHECK(w.binder.unconfirmedCount() == 0);
}

TEST_CASE("binder: an answer lost after the Binding was sent", "[kube][binder][concurrency]") {
  World w;
  SECTION("the Binding was created: the read-back confirms it") {
    BindRequest b = w.pod("lost", 2);
    w.api.setHook([&w](const std::string& m, const std::string& path,
                       const std::string& body) -> std::optional<ApiReply> {
      if (m == "POST" && path.find("/binding") != std::string::npos) {
        json p = *w.api.pod("default", "lost");
        World::storeBinding(p, body);
        w.api.putPod(p);
        return replyFromFailure(ApiErrorKind::kTransport, "connection reset");
      }
      return std::nullopt;
    });
    auto r = w.binder.bind(b);
    INFO(r.status().message());
    REQUIRE(r.isOk());
    CHECK(w.scheduler.allocationOf("uid-lost"));
  }
  SECTION("neither answer is known: the GPUs stay held until reconcile() can tell") {
    BindRequest b = w.pod("dark", 2);
    bool down = true;
    bool bound_for_real = false;
    w.api.setHook([&](const std::string& m, const std::string& path,
                      const std::string& body) -> std::optional<ApiReply> {
      if (m == "POST" && path.find("/binding") != std::string::npos) {
        if (bound_for_real) {
          json p = *w.api.pod("default", "dark");
          World::storeBinding(p, body);
          w.api.putPod(p);
        }
        return replyFromHttp(504, R"({"message":"etcd timeout"})");
      }
      if (m == "GET" && down && w.api.count("POST", "/binding") > 0) {
        return replyFromFailure(ApiErrorKind::kUnreachable, "connection refused");
      }
      return std::nullopt;
    });
    SECTION("it was not bound") {
      auto r = w.binder.bind(b);
      REQUIRE_FALSE(r.isOk());
      CHECK(r.status().message().find("keeps GPUs") != std::string::npos);
      CHECK(w.scheduler.allocationOf("uid-dark"));
      CHECK(w.binder.unconfirmedCount() == 1);
      w.binder.reconcile();  // still down
      CHECK(w.binder.unconfirmedCount() == 1);
      down = false;
      w.binder.reconcile();
      CHECK(w.binder.unconfirmedCount() == 0);
      CHECK_FALSE(w.scheduler.allocationOf("uid-dark"));
    }
    SECTION("it was bound") {
      bound_for_real = true;
      auto r = w.binder.bind(b);
      REQUIRE_FALSE(r.isOk());
      auto held = w.scheduler.allocationOf("uid-dark");
      REQUIRE(held);
      down = false;
      w.binder.reconcile();
      CHECK(w.binder.unconfirmedCount() == 0);
      REQUIRE(w.scheduler.allocationOf("uid-dark"));
      CHECK(w.scheduler.allocationOf("uid-dark")->gpus == held->gpus);
    }
  }
}

TEST_CASE("binder: a Binding the pod watch never shows is read back, and the watch called stale",
          "[kube][binder][liveness]") {
  using Check = Binder::EchoCheck;
  using std::chrono::milliseconds;
  World w;
  auto watched = [&w](const std::string& name) {
    w.sync.podHandler().event(troupe::kube::WatchEventType::kModified, toKube(*w.api.pod("default", name)));
  };
  // The stream opened long before; a Binding is due 1 ms after it was created.
  const Check soon{std::chrono::steady_clock::time_point{}, milliseconds(1)};

  SECTION("the watch shows it: nothing to check") {
    REQUIRE(w.binder.bind(w.pod("seen", 2)).isOk());
    CHECK(w.binder.unechoedCount() == 1);
    watched("seen");
    CHECK(w.binder.unechoedCount() == 0);
    std::this_thread::sleep_for(milliseconds(5));
    const int gets = w.api.count("GET", "/pods/seen");
    CHECK_FALSE(w.binder.reconcile(soon));
    CHECK(w.api.count("GET", "/pods/seen") == gets);
  }
  SECTION("the watch shows it before the API server's answer arrives") {
    BindRequest b = w.pod("early", 2);
    w.api.setHook([&](const std::string& m, const std::string& path,
                      const std::string& body) -> std::optional<ApiReply> {
      if (m != "POST" || path.find("/binding") == std::string::npos) return std::nullopt;
      json p = *w.api.pod("default", "early");
      World::storeBinding(p, body);
      w.api.putPod(p);
      watched("early");
      return replyFromHttp(201, R"({"kind":"Status","status":"Success"})");
    });
    REQUIRE(w.binder.bind(b).isOk());
    CHECK(w.binder.unechoedCount() == 0);
  }
  SECTION("not yet due: counted from the Binding and from the stream's opening") {
    REQUIRE(w.binder.bind(w.pod("young", 2)).isOk());
    CHECK_FALSE(w.binder.reconcile(Check{std::chrono::steady_clock::now(), std::chrono::hours(1)}));
    CHECK_FALSE(
        w.binder.reconcile(Check{std::chrono::steady_clock::now() + std::chrono::hours(1), milliseconds(1)}));
    CHECK_FALSE(w.binder.reconcile());  // no stream open: no check
    CHECK(w.binder.unechoedCount() == 1);
  }
  SECTION("missed and bound: the pod is applied and the watch is stale") {
    REQUIRE(w.binder.bind(w.pod("missed", 2)).isOk());
    CHECK(w.sync.stats().gpu_pods == 0);  // only the watch (or a read) records bound pods
    std::this_thread::sleep_for(milliseconds(5));
    CHECK(w.binder.reconcile(soon));
    CHECK(w.sync.stats().gpu_pods == 1);
    CHECK(w.binder.unechoedCount() == 0);
    CHECK(w.log.str().find("pod watch stale") != std::string::npos);
    CHECK_FALSE(w.binder.reconcile(soon));  // once
  }
  SECTION("missed, but the pod is gone: its GPUs are freed, no verdict") {
    REQUIRE(w.binder.bind(w.pod("gone", 2)).isOk());
    w.api.deletePod("default", "gone");
    std::this_thread::sleep_for(milliseconds(5));
    CHECK_FALSE(w.binder.reconcile(soon));
    CHECK_FALSE(w.scheduler.allocationOf("uid-gone"));
    CHECK(w.binder.unechoedCount() == 0);
  }
  SECTION("the API cannot be read: asked again on the next round") {
    REQUIRE(w.binder.bind(w.pod("later", 2)).isOk());
    w.api.setHook(
        [](const std::string& m, const std::string&, const std::string&) -> std::optional<ApiReply> {
          if (m == "GET") return replyFromFailure(ApiErrorKind::kUnreachable, "connection refused");
          return std::nullopt;
        });
    std::this_thread::sleep_for(milliseconds(5));
    CHECK_FALSE(w.binder.reconcile(soon));
    CHECK(w.binder.unechoedCount() == 1);
    w.api.setHook(nullptr);
    CHECK(w.binder.reconcile(soon));
  }
}

TEST_CASE("binder: a pod the watch shows unbound is bound with one request", "[kube][binder][watched]") {
  World w;
  BindRequest b = w.pod("w", 2);
  w.watch("w");
  auto r = w.binder.bind(b);
  INFO(r.status().message());
  REQUIRE(r.isOk());
  CHECK(w.reads("w") == 0);  // no GET: the watch said enough
  CHECK(w.api.count("POST", "/pods/w/binding") == 1);
  CHECK(w.nodeOf("w") == "n1");
  CHECK(w.annotation("w") == troupe::kube::formatGpus(r.value().gpus));
  CHECK(w.binder.unechoedCount() == 1);
  SECTION("a retry before the watch shows the binding reads the pod, and binds nothing twice") {
    auto again = w.binder.bind(b);
    INFO(again.status().message());
    REQUIRE(again.isOk());
    CHECK(again.value().gpus == r.value().gpus);
    CHECK(w.reads("w") == 1);
    CHECK(w.api.count("POST", "/binding") == 1);
  }
  SECTION("once the watch shows it bound, a retry reads the pod too") {
    w.watch("w");
    CHECK(w.binder.unechoedCount() == 0);
    auto again = w.binder.bind(b);
    REQUIRE(again.isOk());
    CHECK(again.value().gpus == r.value().gpus);
    CHECK(w.reads("w") == 1);
    CHECK(w.api.count("POST", "/binding") == 1);
  }
}

TEST_CASE("binder: a watch that lags behind the API binds nothing wrongly", "[kube][binder][watched]") {
  World w;
  SECTION("bound elsewhere meanwhile: refused, counted where it is") {
    BindRequest b = w.pod("lag", 2);
    w.watch("lag");
    json p = *w.api.pod("default", "lag");
    p["spec"]["nodeName"] = "n2";
    w.api.putPod(p);
    auto r = w.binder.bind(b);
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Catch::Contains("bound to node n2"));
    auto a = w.scheduler.allocationOf("uid-lag");
    REQUIRE(a);
    CHECK(a->node == "n2");
    CHECK(a->unknown_gpus == 2);
  }
  SECTION("bound to this node by someone else: success, with the GPUs the pod carries") {
    BindRequest b = w.pod("other", 2);
    w.watch("other");
    json p = *w.api.pod("default", "other");
    p["spec"]["nodeName"] = "n1";
    p["metadata"]["annotations"]["troupe.dev/gpus"] = "6,7";
    w.api.putPod(p);
    auto r = w.binder.bind(b);
    INFO(r.status().message());
    REQUIRE(r.isOk());
    CHECK(r.value().gpus == std::vector<int>{6, 7});
    CHECK(w.scheduler.allocationOf("uid-other")->gpus == std::vector<int>{6, 7});
  }
  SECTION("replaced by a pod of the same name: refused, nothing held") {
    BindRequest b = w.pod("re", 2);
    w.watch("re");
    json p = *w.api.pod("default", "re");
    p["metadata"]["uid"] = "uid-new";
    w.api.putPod(p);
    auto r = w.binder.bind(b);
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Catch::Contains("replaced"));
    CHECK_FALSE(w.scheduler.allocationOf("uid-re"));
  }
  SECTION("deleted meanwhile: not found, nothing held") {
    BindRequest b = w.pod("gone", 2);
    w.watch("gone");
    w.api.deletePod("default", "gone");
    auto r = w.binder.bind(b);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kNotFound);
    CHECK_FALSE(w.scheduler.allocationOf("uid-gone"));
  }
  CHECK(w.binder.unconfirmedCount() == 0);
}

TEST_CASE("binder: the watch never lets another profile's pod skip the read", "[kube][binder][watched]") {
  World w;
  json p = podJson("dflt", 2);
  p["spec"]["schedulerName"] = "default-scheduler";
  w.api.putPod(p);
  troupe::sched::PodFacts f = troupe::testing::gpuPod("dflt", 2);
  f.uid = "uid-dflt";
  REQUIRE_FALSE(w.scheduler.filter(f, {"n1"}).passed.empty());
  w.watch("dflt");
  auto r = w.binder.bind(BindRequest{"dflt", "default", "uid-dflt", "n1"});
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(r.status().message(), Catch::Contains("default-scheduler"));
  CHECK(w.reads("dflt") == 1);
  CHECK(w.api.count("POST", "/binding") == 0);
}

TEST_CASE("cluster sync: the unbound GPU pods the binder may bind without a read", "[kube][sync][watched]") {
  troupe::kube::testing::SyncWorld w;
  auto view = [](const json& j) { return troupe::kube::decodePod(toKube(j)).value(); };
  w.sync.applyPod(view(podJson("a", 2)));
  REQUIRE(w.sync.pendingPod("uid-a"));
  CHECK(w.sync.pendingPod("uid-a")->name == "a");
  CHECK(w.sync.pendingPod("uid-a")->ns == "default");
  CHECK(w.sync.pendingPod("uid-a")->scheduler_name == "troupe-scheduler");
  w.sync.applyPod(view(podJson("cpu", 0)));
  CHECK_FALSE(w.sync.pendingPod("uid-cpu"));  // not a GPU pod: nothing kept
  json dying = podJson("dying", 1);
  dying["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z";
  w.sync.applyPod(view(dying));
  CHECK_FALSE(w.sync.pendingPod("uid-dying"));
  w.sync.applyPod(view(podJson("a", 2, "n1", "0,1")));  // bound
  CHECK_FALSE(w.sync.pendingPod("uid-a"));
  w.sync.applyPod(view(podJson("b", 1)));
  w.sync.deletePod("uid-b");
  CHECK_FALSE(w.sync.pendingPod("uid-b"));
  // A relist forgets the pods it no longer shows.
  w.sync.applyPod(view(podJson("c", 1)));
  w.sync.podHandler().beginList();
  w.sync.podHandler().endList();
  CHECK_FALSE(w.sync.pendingPod("uid-c"));
}

TEST_CASE("events: rate-limited per pod and reason, and overall", "[kube][events]") {
  FakeApi api;
  std::ostringstream log;
  troupe::adapters::Logger logger{log, troupe::adapters::LogLevel::kDebug};
  auto t = EventRecorder::Clock::time_point{} + std::chrono::hours(1);
  troupe::kube::EventOptions options;
  options.rate_per_second = 1;
  options.burst = 3;
  options.instance = "host-1";
  EventRecorder events(api, logger, options, [&t] { return t; });
  troupe::kube::PodRef a{"ns", "a", "uid-a"};
  CHECK(events.podEvent(a, "Normal", "GPUsAssigned", "m"));
  CHECK_FALSE(events.podEvent(a, "Normal", "GPUsAssigned", "m"));  // same pod and reason
  CHECK(events.podEvent(a, "Warning", "Other", "m"));
  CHECK(events.podEvent({"ns", "b", "uid-b"}, "Normal", "GPUsAssigned", "m"));
  CHECK_FALSE(events.podEvent({"ns", "c", "uid-c"}, "Normal", "GPUsAssigned", "m"));  // bucket empty
  t += std::chrono::seconds(2);
  CHECK(events.podEvent({"ns", "c", "uid-c"}, "Normal", "GPUsAssigned", "m"));
  t += std::chrono::seconds(61);
  CHECK(events.podEvent(a, "Normal", "GPUsAssigned", "m"));  // the interval has passed
  events.flush();
  CHECK(events.posted() == 5);
  CHECK(events.dropped() == 2);
  json e = json::parse(api.calls().front().body);
  CHECK(e["kind"] == "Event");
  CHECK(e["metadata"]["namespace"] == "ns");
  CHECK(e["metadata"]["name"].get<std::string>().rfind("a.", 0) == 0);
  CHECK(e["reportingInstance"] == "host-1");
  CHECK(e["count"] == 1);
  CHECK(api.calls().front().path == "/api/v1/namespaces/ns/events");
}
