// One decoder for both shapes of a native PodGroup (scheduling.k8s.io v1alpha2 on Kubernetes
// 1.36, v1beta1 on 1.37: k8s.io/api v0.36.3 scheduling/v1alpha2 and v0.37.2 scheduling/v1beta1
// types.go), and the discovery that picks the version: v1 when it serves podgroups, else
// v1beta1, else v1alpha2 (scheduling.k8s.io/v1 is served everywhere, for PriorityClasses).
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "adapters/kube/podgroups/native_pod_group.h"
#include "support/kube_test_support.h"

namespace {

using troupe::adapters::Json;
using troupe::kube::ApiReply;
using troupe::kube::decodeNativePodGroup;
using troupe::kube::NativePodGroup;
using troupe::kube::NativePodGroupApi;
using troupe::kube::nativeScheduledCondition;
using troupe::kube::replyFromHttp;
using troupe::kube::testing::FakeApi;

NativePodGroup decode(const char* text) { return decodeNativePodGroup(Json::parse(text), "PodGroup ml/g"); }

// A PodGroup as the API returns it (fields in types.go's json tags).
constexpr const char* kV1beta1 = R"({
  "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
  "metadata": {"name": "train-0", "namespace": "ml", "generation": 2},
  "spec": {
    "parentCompositePodGroupName": "train",
    "workloadRef": {"workloadName": "train", "templateName": "workers"},
    "schedulingPolicy": {"gang": {"minCount": 4}},
    "schedulingConstraints": {"topology": [{"key": "troupe.dev/rack"}]},
    "disruptionMode": {"all": {}},
    "priorityClassName": "batch-high", "priority": 100000, "preemptionPolicy": "Never"
  },
  "status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}]}
})";

constexpr const char* kV1alpha2 = R"({
  "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
  "metadata": {"name": "train-0", "namespace": "ml"},
  "spec": {
    "podGroupTemplateRef": {"workload": {"workloadName": "train", "podGroupTemplateName": "workers"}},
    "schedulingPolicy": {"gang": {"minCount": 4}},
    "schedulingConstraints": {"topology": [{"key": "troupe.dev/rack"}]},
    "disruptionMode": "PodGroup",
    "priorityClassName": "batch-high", "priority": 100000
  }
})";

}  // namespace

TEST_CASE("native PodGroup decoder: v1beta1 (1.37) and v1alpha2 (1.36) read the same",
          "[kube][native-podgroup]") {
  const NativePodGroup beta = decode(kV1beta1);
  const NativePodGroup alpha = decode(kV1alpha2);
  for (const NativePodGroup* g : {&beta, &alpha}) {
    REQUIRE(g->min_count);
    CHECK(*g->min_count == 4);
    CHECK_FALSE(g->basic);
    CHECK(g->error.empty());
    CHECK(g->topology_key == "troupe.dev/rack");
    CHECK(g->workload_name == "train");
    CHECK(g->template_name == "workers");
    CHECK(g->disruption_all);
    CHECK(g->priority_class_name == "batch-high");
    REQUIRE(g->priority);
    CHECK(*g->priority == 100000);
  }
  CHECK(beta.parent_composite == "train");
  CHECK(beta.preemption_policy == "Never");
  CHECK(alpha.parent_composite.empty());
  CHECK(alpha.preemption_policy.empty());
}

TEST_CASE("native PodGroup decoder: disruptionMode in both shapes, default single",
          "[kube][native-podgroup]") {
  CHECK_FALSE(decode(R"({"spec":{"schedulingPolicy":{"basic":{}}}})").disruption_all);
  CHECK_FALSE(
      decode(R"({"spec":{"schedulingPolicy":{"basic":{}},"disruptionMode":{"single":{}}}})").disruption_all);
  CHECK(decode(R"({"spec":{"schedulingPolicy":{"basic":{}},"disruptionMode":{"all":{}}}})").disruption_all);
  CHECK_FALSE(decode(R"({"spec":{"schedulingPolicy":{"basic":{}},"disruptionMode":"Pod"}})").disruption_all);
  CHECK(decode(R"({"spec":{"schedulingPolicy":{"basic":{}},"disruptionMode":"PodGroup"}})").disruption_all);
  CHECK_FALSE(decode(R"({"spec":{"schedulingPolicy":{"basic":{}},"disruptionMode":null}})").disruption_all);
}

TEST_CASE("native PodGroup decoder: unusable policies say why, odd fields are ignored",
          "[kube][native-podgroup]") {
  const NativePodGroup basic = decode(R"({"spec":{"schedulingPolicy":{"basic":{}}}})");
  CHECK(basic.basic);
  CHECK_FALSE(basic.min_count);
  CHECK(basic.error.empty());
  for (const char* bad :
       {R"({})", R"({"spec":null})", R"({"spec":{"schedulingPolicy":{"gang":{"minCount":0}}}})",
        R"({"spec":{"schedulingPolicy":{"gang":{"minCount":100001}}}})",
        R"({"spec":{"schedulingPolicy":{"gang":{"minCount":"4"}}}})",
        R"({"spec":{"schedulingPolicy":{"basic":null}}})", R"([1,2])"}) {
    CAPTURE(bad);
    const NativePodGroup g = decode(bad);
    CHECK_FALSE(g.min_count);
    CHECK_FALSE(g.basic);
    CHECK_THAT(g.error, Catch::StartsWith("PodGroup ml/g has neither spec.schedulingPolicy.gang.minCount"));
  }
  const NativePodGroup odd = decode(
      R"({"spec":{"schedulingPolicy":{"gang":{"minCount":2}},"priority":4294967296,"workloadRef":"x",
          "schedulingConstraints":{"topology":[{"key":7}]},"disruptionMode":{"all":null}}})");
  CHECK(odd.min_count == 2);
  CHECK_FALSE(odd.priority);
  CHECK(odd.workload_name.empty());
  CHECK(odd.topology_key.empty());
  CHECK_FALSE(odd.disruption_all);
}

TEST_CASE("native PodGroup decoder: random groups of either shape round-trip", "[kube][native-podgroup]") {
  std::mt19937 rng(Catch::rngSeed());
  auto pick = [&rng](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  for (int round = 0; round < 500; ++round) {
    const bool beta = pick(2) == 1;
    NativePodGroup want;
    Json spec = Json::object();
    if (pick(4) == 0) {
      want.basic = true;
      spec["schedulingPolicy"] = {{"basic", Json::object()}};
    } else {
      want.min_count = 1 + pick(100000);
      spec["schedulingPolicy"] = {{"gang", {{"minCount", *want.min_count}}}};
    }
    if (pick(2)) {
      want.topology_key = "k" + std::to_string(pick(5));
      spec["schedulingConstraints"] = {
          {"topology", Json::array({{{"key", want.topology_key}}, {{"key", "second"}}})}};
    }
    if (pick(2)) {
      want.workload_name = "w" + std::to_string(pick(9));
      want.template_name = "t" + std::to_string(pick(9));
      spec[beta ? "workloadRef" : "podGroupTemplateRef"] =
          beta ? Json{{"workloadName", want.workload_name}, {"templateName", want.template_name}}
               : Json{{"workload",
                       {{"workloadName", want.workload_name}, {"podGroupTemplateName", want.template_name}}}};
    }
    if (const int mode = pick(3); mode > 0) {
      want.disruption_all = mode == 2;
      spec["disruptionMode"] = beta ? Json{{want.disruption_all ? "all" : "single", Json::object()}}
                                    : Json(want.disruption_all ? "PodGroup" : "Pod");
    }
    if (pick(2)) {
      want.priority =
          static_cast<int32_t>(std::uniform_int_distribution<int64_t>(-2147483648LL, 2147483647LL)(rng));
      spec["priority"] = *want.priority;
      want.priority_class_name = "pc" + std::to_string(pick(3));
      spec["priorityClassName"] = want.priority_class_name;
    }
    if (beta && pick(2)) {
      want.parent_composite = "parent";
      spec["parentCompositePodGroupName"] = "parent";
      want.preemption_policy = pick(2) ? "Never" : "PreemptLowerPriority";
      spec["preemptionPolicy"] = want.preemption_policy;
    }
    const Json obj = {{"apiVersion", beta ? "scheduling.k8s.io/v1beta1" : "scheduling.k8s.io/v1alpha2"},
                      {"kind", "PodGroup"},
                      {"spec", spec}};
    CAPTURE(obj.dump());
    const NativePodGroup got = decodeNativePodGroup(obj, "PodGroup ml/g");
    CHECK(got.min_count == want.min_count);
    CHECK(got.basic == want.basic);
    CHECK(got.error.empty());
    CHECK(got.topology_key == want.topology_key);
    CHECK(got.workload_name == want.workload_name);
    CHECK(got.template_name == want.template_name);
    CHECK(got.parent_composite == want.parent_composite);
    CHECK(got.disruption_all == want.disruption_all);
    CHECK(got.priority == want.priority);
    CHECK(got.priority_class_name == want.priority_class_name);
    CHECK(got.preemption_policy == want.preemption_policy);
  }
}

TEST_CASE("native PodGroup API: discovery picks v1, else v1beta1, else v1alpha2", "[kube][native-podgroup]") {
  // served: the versions whose resource list names podgroups; v1 always serves PriorityClasses.
  std::set<std::string> served;
  int fail = 0;  // answer discovery with this status
  FakeApi api;
  api.setHook(
      [&](const std::string&, const std::string& path, const std::string&) -> std::optional<ApiReply> {
        const std::string prefix = "/apis/scheduling.k8s.io/";
        if (path.rfind(prefix, 0) != 0) return std::nullopt;
        if (fail) return replyFromHttp(fail, R"({"kind":"Status","message":"scripted"})");
        const std::string v = path.substr(prefix.size());
        Json resources = Json::array();
        if (v == "v1") resources.push_back({{"name", "priorityclasses"}});
        if (served.count(v))
          resources.push_back({{"name", "podgroups"}}), resources.push_back({{"name", "podgroups/status"}});
        if (resources.empty()) return replyFromHttp(404, R"({"kind":"Status","message":"not found"})");
        return replyFromHttp(200, Json{{"kind", "APIResourceList"}, {"resources", resources}}.dump());
      });
  auto t = std::chrono::steady_clock::time_point{};
  NativePodGroupApi discovery(api, std::chrono::seconds(10), [&t] { return t; });
  auto fresh = [&] {
    t += std::chrono::seconds(11);
    return discovery.served();
  };

  served = {"v1alpha2"};  // 1.36
  NativePodGroupApi::Served s = fresh();
  CHECK(s.version == "v1alpha2");
  CHECK(s.path() == "/apis/scheduling.k8s.io/v1alpha2");
  CHECK(nativeScheduledCondition(s.version) == "PodGroupScheduled");
  const uint64_t reads = discovery.discoveryReads();
  CHECK(discovery.served().version == "v1alpha2");  // cached
  CHECK(discovery.discoveryReads() == reads);

  served = {"v1beta1"};  // 1.37: v1alpha2 removed; noticed once the cached answer expires
  CHECK(discovery.served().version == "v1alpha2");
  s = fresh();
  CHECK(s.version == "v1beta1");
  CHECK(nativeScheduledCondition(s.version) == "PodGroupInitiallyScheduled");

  served = {"v1beta1", "v1alpha2"};
  CHECK(fresh().version == "v1beta1");
  served = {"v1", "v1beta1"};
  CHECK(fresh().version == "v1");

  // A failing discovery keeps the version known before (the server may be restarting) ...
  fail = 503;
  s = fresh();
  CHECK(s.version == "v1");
  // ... and says so when none was known; it is asked again every time.
  served = {};
  fail = 0;
  s = fresh();
  CHECK(s.version.empty());
  CHECK_FALSE(s.unknown);
  fail = 500;
  s = fresh();
  CHECK(s.version.empty());
  CHECK(s.unknown);
  CHECK_THAT(s.error, Catch::Contains("scripted"));
  const uint64_t before = discovery.discoveryReads();
  discovery.served();
  CHECK(discovery.discoveryReads() > before);
  CHECK_THAT(NativePodGroupApi::notServedReason(), Catch::Contains("scheduling.k8s.io/v1beta1=true"));
}
