// The best-fit policy: the least weighted leftover (CPU and GPU) after the pod wins.
#include <catch2/catch.hpp>

#include "support/policy_test_support.h"

namespace {

namespace tt = troupe::testing;

TEST_CASE("best-fit: the node left with the least room wins", "[policy][best-fit]") {
  tt::SmallCluster c;
  c.add("empty-8", 8);
  tt::SmallCluster::use(c.add("used-8", 8), {0, 1, 2, 3, 4});
  c.add("empty-4", 4);
  const auto policy = tt::builtin("best-fit");
  CHECK(c.best(*policy, tt::request(1)) == "used-8");  // 2 GPUs left, against 3 and 7
  tt::SmallCluster d;
  d.add("empty-8", 8);
  d.add("empty-4", 4);
  CHECK(d.best(*policy, tt::request(1)) == "empty-4");
}

TEST_CASE("best-fit: the score is 100 x (1 - mean leftover share)", "[policy][best-fit]") {
  tt::SmallCluster c;
  troupe::model::NodeState& n = c.add("n", 8, "NVIDIA-L4", "64");
  // Leftover: CPU 60/128, GPU 4/8 -> 100 * (1 - (0.46875 + 0.5) / 2) = 51.56 -> 51.
  CHECK(tt::builtin("best-fit")->score(n, tt::request(4, 1000, 4000), {}).value == 51);
}

}  // namespace
