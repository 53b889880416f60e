// The binpack policy: the fullest node after the pod wins.
#include <catch2/catch.hpp>

#include "support/policy_test_support.h"

namespace {

namespace tt = troupe::testing;

TEST_CASE("binpack: the node with the most GPU use after the pod wins", "[policy][binpack]") {
  tt::SmallCluster c;
  c.add("empty", 8);
  troupe::model::NodeState& part = c.add("part", 8);
  tt::SmallCluster::use(part, {0, 1, 2});
  const auto policy = tt::builtin("binpack");
  CHECK(c.best(*policy, tt::request(1)) == "part");
  CHECK(policy->score(part, tt::request(1), {}).value == Approx(0.5));  // 4 of 8 after the pod
  CHECK(policy->unitScore(part, tt::request(1), {}, {}) == Approx(0.5));
}

}  // namespace
