// The gpu-packing policy: shared GPUs first, then used nodes that open the fewest fresh GPUs,
// then untouched nodes.
#include <catch2/catch.hpp>

#include "support/policy_test_support.h"

namespace {

namespace tt = troupe::testing;

TEST_CASE("gpu-packing: a share goes onto an already shared GPU before a fresh one",
          "[policy][gpu-packing]") {
  tt::SmallCluster c;
  c.add("untouched", 4);
  tt::SmallCluster::use(c.add("whole-used", 4), {0});
  tt::SmallCluster::use(c.add("shared", 4), {1}, 300);
  CHECK(c.best(*tt::builtin("gpu-packing"), tt::request(1, 500)) == "shared");
}

TEST_CASE("gpu-packing: bands order shared, used, untouched nodes", "[policy][gpu-packing]") {
  tt::SmallCluster c;
  troupe::model::NodeState& untouched = c.add("untouched", 4);
  troupe::model::NodeState& used = c.add("used", 4);
  tt::SmallCluster::use(used, {0});
  const auto policy = tt::builtin("gpu-packing");
  const double fresh_on_used = policy->score(used, tt::request(1), {}).value;
  const double fresh_on_untouched = policy->score(untouched, tt::request(1), {}).value;
  CHECK(fresh_on_used == 49);                                          // 50 - one fresh GPU opened
  CHECK(fresh_on_untouched == 29);                                     // max(33 - 4, 4)
  CHECK(policy->score(used, tt::request(0, 0, 1000), {}).value == 0);  // CPU-only pods: no preference
}

}  // namespace
