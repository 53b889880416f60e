// The policy registry: names resolve to policies, duplicates and unknown names are refused.
#include "troupe/sched/policies/policy_registry.h"

#include <catch2/catch.hpp>

#include "troupe/sched/score/node_scoring.h"

namespace {

using troupe::sched::PolicyRegistry;

TEST_CASE("policy registry: the built-in policies, each once, in --help's order", "[policy][registry]") {
  CHECK(troupe::sched::builtinPolicies().names() ==
        std::vector<std::string>{"troupe", "fgd", "best-fit", "dot-product", "gpu-packing", "gpu-clustering",
                                 "random", "kube", "binpack", "spread"});
  for (const std::string& name : troupe::sched::builtinPolicies().names()) {
    auto made = troupe::sched::builtinPolicies().create(name);
    REQUIRE(made.isOk());
    CHECK(made.value()->name() == name);
  }
}

TEST_CASE("policy registry: a second policy of the same name is refused", "[policy][registry]") {
  PolicyRegistry r;
  auto rule = [](const troupe::model::NodeState&, const troupe::sched::GpuRequest&) { return 1.0; };
  REQUIRE(r.add(troupe::sched::rulePolicy({"mine", rule})).isOk());
  const troupe::Status again = r.add(troupe::sched::rulePolicy({"mine", rule}));
  CHECK_FALSE(again.isOk());
  CHECK(again.message() == "policy \"mine\" is already registered");
  CHECK(r.names() == std::vector<std::string>{"mine"});
  CHECK_FALSE(r.add({"", nullptr}).isOk());
  CHECK_FALSE(r.add({"no-factory", nullptr}).isOk());
}

TEST_CASE("policy registry: an unknown name lists the known ones", "[policy][registry]") {
  auto made = troupe::sched::builtinPolicies().create("tetris");
  REQUIRE_FALSE(made.isOk());
  CHECK(made.status().message() ==
        "unknown policy \"tetris\"; expected one of troupe, fgd, best-fit, dot-product, gpu-packing, "
        "gpu-clustering, random, kube, binpack, spread");
}

}  // namespace
