// Model pressure (model_pressure.h): what the constrained requests of the mix will want of each
// GPU model, against its free capacity; and the troupe policy steering by it.
#include "troupe/sched/score/model_pressure.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "support/fixtures.h"
#include "support/policy_test_support.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/request/request_mix.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace {

using troupe::sched::GpuRequest;
using troupe::sched::ModelPressure;
using troupe::sched::RequestMix;

GpuRequest whole(int gpus, std::vector<std::string> models = {}) {
  GpuRequest r;
  r.gpus = gpus;
  r.models = std::move(models);
  return r;
}

}  // namespace

TEST_CASE("request mix: each list of models gets its share of the GPU request", "[pressure]") {
  std::vector<GpuRequest> reqs{whole(1, {"T4"}), whole(1, {"T4"}), whole(2), whole(4, {"G2", "T4"})};
  GpuRequest cpu_only;
  cpu_only.gpus = 0;
  reqs.push_back(cpu_only);  // no GPU request: counts in neither part
  const RequestMix mix = RequestMix::fromRequests(reqs);
  REQUIRE(mix.constrained().size() == 2);
  double t4 = 0, g2t4 = 0;
  for (const auto& c : mix.constrained()) (c.models.size() == 1 ? t4 : g2t4) = c.share;
  CHECK(t4 == Approx(2.0 / 8.0));
  CHECK(g2t4 == Approx(4.0 / 8.0));
  CHECK(RequestMix::fromRequests({whole(1), whole(8)}).constrained().empty());
}

TEST_CASE("model pressure: hand-computed cases", "[pressure]") {
  // A quarter of the request can use only T4s; the cluster has 2 free T4s and 8 free G2s.
  const RequestMix t4_only = RequestMix::fromRequests({whole(1, {"T4"}), whole(3)});
  const ModelPressure p = ModelPressure::compute(t4_only, {{"T4", 2000}, {"G2", 8000}});
  // Until the cluster is full (10 GPUs more), T4-only pods ask 2.5 GPUs of the 2 free T4s.
  CHECK(p.of("T4") == Approx(1.25));
  CHECK(p.of("t4") == Approx(1.25));  // products compare case-insensitively
  CHECK(p.of("G2") == 0.0);
  CHECK(p.of("A100") == 0.0);
  CHECK_FALSE(p.empty());
  // A list naming both spreads over both as they have room: half the request, all the room.
  const RequestMix both = RequestMix::fromRequests({whole(1, {"T4", "G2"}), whole(1)});
  const ModelPressure q = ModelPressure::compute(both, {{"T4", 2000}, {"G2", 8000}});
  CHECK(q.of("T4") == Approx(0.5));
  CHECK(q.of("G2") == Approx(0.5));
  // Nothing constrained, nothing free, or the list's models all full: no pressure anywhere.
  CHECK(ModelPressure::compute(RequestMix::fromRequests({whole(1)}), {{"T4", 2000}}).empty());
  CHECK(ModelPressure::compute(t4_only, {{"T4", 0}, {"G2", 0}}).empty());
  CHECK(ModelPressure::compute(t4_only, {{"T4", 0}, {"G2", 8000}}).empty());
}

TEST_CASE("model pressure: random mixes keep the constrained request whole", "[pressure]") {
  // Sum over products of pressure x free = free x (sum of the shares of the lists with room):
  // the expected constrained request until full is spread over the products, none lost or
  // counted twice; and no pressure is negative.
  const std::vector<std::string> products{"T4", "G2", "P100", "V100M16", "A10"};
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<GpuRequest> reqs;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> models;
      for (const std::string& p : products) {
        if (rng() % 4 == 0) models.push_back(p);
      }
      reqs.push_back(whole(1 + static_cast<int>(rng() % 8), models));
    }
    std::vector<std::pair<std::string, int64_t>> free;
    int64_t free_all = 0;
    for (const std::string& p : products) {
      const int64_t f = rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 50) * 1000;
      free.emplace_back(p, f);
      free_all += f;
    }
    const RequestMix mix = RequestMix::fromRequests(reqs);
    const ModelPressure pressure = ModelPressure::compute(mix, free);
    double spread = 0;
    for (const auto& [p, f] : free) {
      REQUIRE(pressure.of(p) >= 0.0);
      spread += pressure.of(p) * static_cast<double>(f);
    }
    double expected = 0;
    for (const auto& c : mix.constrained()) {
      int64_t room = 0;
      for (const auto& [p, f] : free) {
        if (std::find(c.models.begin(), c.models.end(), p) != c.models.end()) room += f;
      }
      if (room > 0) expected += c.share * static_cast<double>(free_all);
    }
    INFO("round " << round);
    CHECK(spread == Approx(expected).epsilon(1e-9).margin(1e-6));
  }
}

TEST_CASE("troupe: a pod that may use any model leaves the scarce one to the pods that need it",
          "[pressure][policy]") {
  troupe::sched::SchedulerConfig config;
  config.policy = troupe::sched::builtinPolicies().create("troupe").value();
  config.narrow_to_best = true;
  troupe::sched::Scheduler s(config);
  // A T4 node of 2 GPUs and a G2 node of 4: without the scarcity term the troupe policy fills
  // the smaller node first.
  for (auto [name, product, gpus] : {std::tuple{"t4", "T4", 2}, {"g2", "G2", 4}}) {
    REQUIRE(s.upsertNode(troupe::testing::gpuNode(name, gpus, product)).isOk());
  }
  // The recent requests: most can use only T4s (500 of them refresh the request window).
  for (int i = 0; i < 500; ++i) {
    auto pod = troupe::testing::gpuPod(
        "t4-" + std::to_string(i), 1,
        i % 4 == 0 ? troupe::sched::StringMap{} : troupe::sched::StringMap{{"troupe.dev/gpu-model", "T4"}});
    s.filter(pod, {});
    s.forgetPod(pod.uid);
  }
  const auto any = troupe::testing::gpuPod("any", 1);
  // prioritize (narrowing off: kube-scheduler weighs the scores) leans the same way.
  const std::vector<troupe::sched::HostValue> ranked = s.prioritize(any, {"t4", "g2"});
  REQUIRE(ranked.size() == 2);
  CHECK(ranked[1].value > ranked[0].value);
  const troupe::sched::FilterResult r = s.filter(any, {"t4", "g2"});
  REQUIRE(r.passed.size() == 1);
  CHECK(r.passed[0] == "g2");
  // The term itself: per unit of pressure, scarcity_weight points off a GPU request on the
  // model, nothing off a CPU-only one or on a model no list names; 0 turns it off.
  const RequestMix mix = RequestMix::fromRequests({whole(1, {"T4"}), whole(3)});
  const ModelPressure pressure = ModelPressure::compute(mix, {{"T4", 2000}, {"G2", 8000}});
  troupe::testing::SmallCluster small;
  const troupe::model::NodeState& t4 = small.add("t4", 2, "T4");
  const troupe::model::NodeState& g2 = small.add("g2", 4, "G2");
  auto troupe_with = [](double weight) {
    troupe::sched::PolicyArgs args;
    args.troupe.scarcity_weight = weight;
    return troupe::sched::builtinPolicies().create("troupe", args).value();
  };
  GpuRequest cpu_only;
  cpu_only.gpus = 0;
  CHECK(troupe_with(50)->scarcityPenalty(t4, whole(1), pressure) == Approx(50 * 1.25));
  CHECK(troupe_with(50)->scarcityPenalty(g2, whole(1), pressure) == 0.0);
  CHECK(troupe_with(50)->scarcityPenalty(t4, cpu_only, pressure) == 0.0);
  CHECK(troupe_with(0)->scarcityPenalty(t4, whole(1), pressure) == 0.0);
  CHECK(troupe::sched::builtinPolicies().create("fgd").value()->scarcityPenalty(t4, whole(1), pressure) ==
        0.0);
}
