// The troupe policy: fragmentation on the live mix decides; its weights (TroupeArgs) only break
// fragmentation's ties.
#include <catch2/catch.hpp>

#include "policy_test_support.h"

namespace {

namespace tt = troupe::testing;
using troupe::sched::RequestMix;

// A mix of whole single-GPU pods only: a GPU with any share taken is a fragment for it.
RequestMix wholeGpuMix() { return RequestMix::fromRequests({tt::request(1), tt::request(1)}); }

TEST_CASE("troupe: a share goes where it removes a fragment, even on the bigger node", "[policy][troupe]") {
  tt::SmallCluster c;
  troupe::model::NodeState& big = c.add("big", 8);
  tt::SmallCluster::use(big, {3}, 500);  // GPU 3 half used: 500 milli no whole-GPU pod can use
  c.add("small", 4);
  const RequestMix mix = wholeGpuMix();
  const troupe::sched::ScoreContext context{&mix, nullptr};
  const auto policy = tt::builtin("troupe");
  CHECK(c.best(*policy, tt::request(1, 500), context) == "big");
  // ... on the half-used GPU, which it fills.
  CHECK(policy->score(big, tt::request(1, 500), context).placement.gpus == std::vector<int>{3});
}

TEST_CASE("troupe: among equally fragmenting nodes the pack weight puts smaller nodes first",
          "[policy][troupe]") {
  tt::SmallCluster c;
  troupe::model::NodeState& big = c.add("big", 8);
  troupe::model::NodeState& small = c.add("small", 4);
  // Whole GPUs and half GPUs: shares carry a third of the GPU request.
  const RequestMix mix = RequestMix::fromRequests({tt::request(1), tt::request(1, 500), tt::request(1, 500)});
  REQUIRE(mix.sharingShare() == Approx(0.5));
  const troupe::sched::ScoreContext context{&mix, nullptr};
  const auto req = tt::request(1);
  const auto defaults = tt::builtin("troupe");
  CHECK(defaults->score(small, req, context).value > defaults->score(big, req, context).value);
  CHECK(c.best(*defaults, req, context) == "small");
  // Without the pack term the two nodes tie: the weights are the policy's arguments.
  troupe::sched::PolicyArgs args;
  args.troupe = {0.0, 1.0, 0.0};
  const auto topology_only = tt::builtin("troupe", args);
  CHECK(topology_only->score(small, req, context).value == topology_only->score(big, req, context).value);
  // Where shares carry under a quarter of the recent GPU request, the pack term is off too (the
  // fixed node order placed better there); before any request is seen it is on.
  const RequestMix whole = wholeGpuMix();
  REQUIRE(whole.sharingShare() == 0.0);
  const troupe::sched::ScoreContext whole_context{&whole, nullptr};
  CHECK(defaults->score(small, req, whole_context).value == defaults->score(big, req, whole_context).value);
  const troupe::sched::ScoreContext unseen{&RequestMix::defaults(), nullptr};
  CHECK(defaults->score(small, req, unseen).value > defaults->score(big, req, unseen).value);
}

TEST_CASE("troupe: a multi-GPU pod takes the node's best-connected GPUs", "[policy][troupe]") {
  tt::SmallCluster c;
  troupe::model::NodeState& h100 = c.add("h100", 8, "NVIDIA-H100-80GB-HBM3");
  const auto s = tt::builtin("troupe")->score(h100, tt::request(4), {});
  CHECK(s.placement.gpus.size() == 4);
  CHECK(s.placement.best_possible);
}

TEST_CASE("troupe: validated arguments name the field", "[policy][troupe]") {
  CHECK(troupe::sched::validateTroupeArgs({}).empty());
  const auto errors = troupe::sched::validateTroupeArgs({-1, 0, 0});
  REQUIRE(errors.size() == 2);
  CHECK(errors[0].rfind("policy.weights.pack: must be >= 0", 0) == 0);
  CHECK(errors[1] == "policy.weights: at least one of pack, topology, domains must be > 0");
}

}  // namespace
