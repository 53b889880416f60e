// The dot-product policy: the node whose free resources align least with the request wins.
#include <catch2/catch.hpp>

#include "support/policy_test_support.h"

namespace {

namespace tt = troupe::testing;

TEST_CASE("dot-product: less free room in the requested resources wins", "[policy][dot-product]") {
  tt::SmallCluster c;
  c.add("empty", 8, "NVIDIA-L4", "64");
  tt::SmallCluster::use(c.add("busy", 8, "NVIDIA-L4", "64"), {0, 1, 2, 3, 4, 5});
  const auto policy = tt::builtin("dot-product");
  CHECK(c.best(*policy, tt::request(1)) == "busy");
}

TEST_CASE("dot-product: a CPU-only pod weighs only free CPU", "[policy][dot-product]") {
  tt::SmallCluster c;
  troupe::model::NodeState& idle = c.add("idle", 8, "NVIDIA-L4", "64");
  troupe::model::NodeState& loaded = c.add("loaded", 8, "NVIDIA-L4", "64");
  tt::SmallCluster::use(loaded, {}, 1000, 48000);
  const auto policy = tt::builtin("dot-product");
  const auto req = tt::request(0, 0, 8000);
  CHECK(policy->score(loaded, req, {}).value > policy->score(idle, req, {}).value);
}

}  // namespace
