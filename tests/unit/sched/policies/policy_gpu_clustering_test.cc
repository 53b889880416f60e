// The gpu-clustering policy: nodes hosting pods of the same kind first.
#include <catch2/catch.hpp>

#include "support/policy_test_support.h"

namespace {

namespace tt = troupe::testing;

TEST_CASE("gpu-clustering: same kind, then untouched, then other kinds", "[policy][gpu-clustering]") {
  tt::SmallCluster c;
  troupe::model::NodeState& same = c.add("same", 8);
  tt::SmallCluster::use(same, {0});  // a 1-GPU pod
  troupe::model::NodeState& untouched = c.add("untouched", 8);
  troupe::model::NodeState& other = c.add("other", 8);
  tt::SmallCluster::use(other, {0, 1});  // a 2-GPU pod
  const auto policy = tt::builtin("gpu-clustering");
  const auto req = tt::request(1);
  CHECK(c.best(*policy, req) == "same");
  CHECK(policy->score(untouched, req, {}).value > policy->score(other, req, {}).value);
  // A 2-GPU pod prefers the node with the other 2-GPU pod.
  CHECK(c.best(*policy, tt::request(2)) == "other");
}

}  // namespace
