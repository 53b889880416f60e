// The fgd policy: FGD's integer fragmentation score on the paper's GPU choice.
#include <catch2/catch.hpp>

#include "support/policy_test_support.h"

namespace {

namespace tt = troupe::testing;
using troupe::sched::RequestMix;

TEST_CASE("fgd: a share fills the GPU whose leftover no typical pod can use", "[policy][fgd]") {
  tt::SmallCluster c;
  troupe::model::NodeState& used = c.add("used", 4);
  tt::SmallCluster::use(used, {2}, 500);
  c.add("empty", 4);
  const RequestMix mix = RequestMix::fromRequests({tt::request(1), tt::request(1)});
  const troupe::sched::ScoreContext context{&mix, nullptr};
  const auto fgd = tt::builtin("fgd");
  CHECK(c.best(*fgd, tt::request(1, 500), context) == "used");
  CHECK(fgd->score(used, tt::request(1, 500), context).placement.gpus == std::vector<int>{2});
}

TEST_CASE("fgd: whole GPUs on equal empty nodes score alike, so the node order decides", "[policy][fgd]") {
  tt::SmallCluster c;
  troupe::model::NodeState& a = c.add("a", 4);
  troupe::model::NodeState& b = c.add("b", 4);
  const auto fgd = tt::builtin("fgd");
  CHECK(fgd->score(a, tt::request(2), {}).value == fgd->score(b, tt::request(2), {}).value);
  CHECK(fgd->score(a, tt::request(2), {}).placement.gpus == std::vector<int>{0, 1});  // lowest free
  CHECK(troupe::sched::hooksOf(*fgd).sharesNodeValues());
}

}  // namespace
