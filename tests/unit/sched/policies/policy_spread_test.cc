// The spread policy: the emptiest node after the pod wins.
#include <catch2/catch.hpp>

#include "support/policy_test_support.h"

namespace {

namespace tt = troupe::testing;

TEST_CASE("spread: the node with the least GPU use after the pod wins", "[policy][spread]") {
  tt::SmallCluster c;
  troupe::model::NodeState& empty = c.add("empty", 8);
  tt::SmallCluster::use(c.add("part", 8), {0, 1, 2});
  const auto policy = tt::builtin("spread");
  CHECK(c.best(*policy, tt::request(2)) == "empty");
  CHECK(policy->score(empty, tt::request(2), {}).value == Approx(0.75));  // 2 of 8 used after the pod
  CHECK(policy->unitScore(empty, tt::request(2), {}, {}) == Approx(0.75));
}

}  // namespace
