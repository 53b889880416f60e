// The random policy: the simulator draws the node; live, nodes rank by a hash of name and load.
#include <catch2/catch.hpp>

#include "support/policy_test_support.h"

namespace {

namespace tt = troupe::testing;

TEST_CASE("random: with a stream the draw chooses, without one a stable hash does", "[policy][random]") {
  const auto policy = tt::builtin("random");
  REQUIRE(troupe::sched::hooksOf(*policy).drawsNode());
  int asked = 0;
  const troupe::sched::Draw draw = [&](int n) {
    asked = n;
    return n - 1;
  };
  auto never = [](size_t) -> double {
    FAIL("a drawn node is not scored");
    return 0;
  };
  auto rank = [](size_t i) { return i; };
  CHECK(troupe::sched::chooseNode(5, *policy, policy->tieBreak(), never, rank, draw) == 4);
  CHECK(asked == 5);

  tt::SmallCluster c;
  troupe::model::NodeState& a = c.add("a", 4);
  troupe::model::NodeState& b = c.add("b", 4);
  const double ha = policy->rankValue(a, tt::request(1), {});
  CHECK(ha == policy->rankValue(a, tt::request(1), {}));  // no hidden state
  CHECK(ha != policy->rankValue(b, tt::request(1), {}));  // varies across nodes
  CHECK(ha >= 0);
  CHECK(ha < 1);
  tt::SmallCluster::use(a, {0});
  CHECK(ha != policy->rankValue(a, tt::request(1), {}));   // ... and with the node's load
  CHECK(policy->score(b, tt::request(1), {}).value == 0);  // every node alike for the simulator
}

}  // namespace
