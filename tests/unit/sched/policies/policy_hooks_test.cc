// PolicyHooks: what the score memo and the simulator ask of a policy, apart from Policy.
#include "troupe/sched/policies/policy_hooks.h"

#include <catch2/catch.hpp>

#include "support/policy_test_support.h"

namespace {

namespace tt = troupe::testing;
using troupe::sched::hooksOf;

TEST_CASE("policy hooks: a policy without them gets the defaults", "[policy][hooks]") {
  for (const char* name :
       {"best-fit", "dot-product", "gpu-packing", "gpu-clustering", "kube", "binpack", "spread"}) {
    INFO(name);
    const auto policy = tt::builtin(name);
    const troupe::sched::PolicyHooks& hooks = hooksOf(*policy);
    CHECK_FALSE(hooks.sharesNodeValues());
    CHECK_FALSE(hooks.drawsNode());
    CHECK_FALSE(hooks.usesLiveMix());
    tt::SmallCluster c;
    CHECK(hooks.shareClass(c.add("a", 4), tt::request(1), {}) == 0);
  }
}

TEST_CASE("policy hooks: the built-in policies that have them", "[policy][hooks]") {
  const auto troupe_policy = tt::builtin("troupe");
  CHECK(hooksOf(*troupe_policy).sharesNodeValues());
  CHECK(hooksOf(*troupe_policy).usesLiveMix());
  CHECK_FALSE(hooksOf(*troupe_policy).drawsNode());
  const auto fgd = tt::builtin("fgd");
  CHECK(hooksOf(*fgd).sharesNodeValues());
  CHECK_FALSE(hooksOf(*fgd).usesLiveMix());
  const auto random = tt::builtin("random");
  CHECK(hooksOf(*random).drawsNode());
  CHECK_FALSE(hooksOf(*random).sharesNodeValues());
}

}  // namespace
