// The troupe policy: fragmentation on the live mix decides; its weights (TroupeArgs) only break
// fragmentation's ties.
#include <catch2/catch.hpp>
#include <cmath>

#include "support/policy_test_support.h"
#include "troupe/model/gpu_selection.h"
#include "troupe/sched/score/fragmentation.h"
#include "troupe/sched/score/node_scoring.h"
#include "troupe/sched/score/whole_node_pressure.h"

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

TEST_CASE(
    "troupe: a share takes the GPU part whose rest later shares fill, where FGD's next-request view differs",
    "[policy][troupe]") {
  tt::SmallCluster c;
  troupe::model::NodeState& node = c.add("n", 2);
  tt::SmallCluster::use(node, {0}, 230);  // GPU 0: 770 milli free
  tt::SmallCluster::use(node, {1}, 470);  // GPU 1: 530 milli free
  // Whole GPUs and the trace's common shares of 810, 650, 470, 320 and 230 milli.
  std::vector<troupe::sched::GpuRequest> reqs;
  for (auto [milli, count] : {std::pair{1000, 2}, {810, 2}, {650, 1}, {470, 1}, {320, 2}, {230, 1}}) {
    for (int i = 0; i < count; ++i) reqs.push_back(tt::request(1, milli));
  }
  const RequestMix mix = RequestMix::fromRequests(reqs, 1.0);
  const troupe::sched::ScoreContext context{&mix, nullptr};
  const auto share = tt::request(1, 230);
  // FGD scores GPU 0 a point better (770 -> 540 leaves the 530 for a 470). Counting what stays
  // unused for good, 530 -> 300 adds less waste than 770 -> 540, and troupe takes GPU 1.
  CHECK(tt::builtin("fgd")->score(node, share, context).placement.gpus == std::vector<int>{0});
  CHECK(mix.fragmentWaste(300) - mix.fragmentWaste(530) < mix.fragmentWaste(540) - mix.fragmentWaste(770));
  CHECK(tt::builtin("troupe")->score(node, share, context).placement.gpus == std::vector<int>{1});
  // The weight moves the share's points and GPU; the delta it reports stays F's own change.
  const auto fgd_eval = troupe::sched::evalFragmentation(node, share, context, 0);
  const auto troupe_eval = troupe::sched::evalFragmentation(node, share, context, 0, 0.2);
  CHECK(fgd_eval.gpu == 0);
  CHECK(troupe_eval.gpu == 1);
  const auto access = troupe::sched::mixAccess(mix, node.info().gpu_product);
  const int64_t cpu = troupe::sched::cpuLeft(node);
  const std::vector<int64_t> before{770, 530}, after{770, 300};
  CHECK(troupe_eval.delta == Approx(troupe::sched::fragmentation(mix, access, cpu, after) -
                                    troupe::sched::fragmentation(mix, access, cpu, before)));
  // A whole-GPU request takes whole GPUs, whose waste is the same anywhere: no weight applies.
  troupe::model::NodeState& empty = c.add("empty", 2);
  CHECK(troupe::sched::evalFragmentation(empty, tt::request(1), context, 1, 0.2).points ==
        troupe::sched::evalFragmentation(empty, tt::request(1), context, 1).points);
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
  troupe::sched::TroupeArgs negative_balance;
  negative_balance.balance_weight = -0.5;
  const auto balance_errors = troupe::sched::validateTroupeArgs(negative_balance);
  REQUIRE(balance_errors.size() == 1);
  CHECK(balance_errors[0].rfind("policy.weights.balance: must be >= 0", 0) == 0);
}

}  // namespace

namespace {

// Single whole GPUs with 10 cores, and CPU-only pods of 20: 30 milli-CPU per milli-GPU.
RequestMix cpuHeavyMix(double cluster_cpu_per_gpu) {
  return RequestMix::fromRequests({tt::request(1, 1000, 10000), tt::request(0, 0, 20000)}, 0.95,
                                  cluster_cpu_per_gpu);
}

}  // namespace

TEST_CASE("request mix: CPU-bound once the typical requests ask 1.06x the cluster's CPU per GPU",
          "[policy][troupe][mix]") {
  CHECK(cpuHeavyMix(0).cpuPerGpu() == Approx(30.0));
  CHECK_FALSE(cpuHeavyMix(0).cpuBound());     // the cluster's CPU unknown: never
  CHECK(cpuHeavyMix(28.0).cpuBound());        // 30 >= 1.06 x 28
  CHECK_FALSE(cpuHeavyMix(28.5).cpuBound());  // 30 < 1.06 x 28.5
  CHECK(cpuHeavyMix(28.5).withClusterCpuPerGpu(28.0).cpuBound());
  // The GPU pods' own load: their 10 cores per GPU (the CPU-only pods' 20 left out), in both ways
  // of giving the cluster's CPU per GPU.
  CHECK(cpuHeavyMix(0).gpuPodsCpuLoad() == 0.0);
  CHECK(cpuHeavyMix(20.0).gpuPodsCpuLoad() == Approx(0.5));
  CHECK(cpuHeavyMix(0).withClusterCpuPerGpu(25.0).gpuPodsCpuLoad() == Approx(0.4));
  CHECK_FALSE(RequestMix::fromRequests({tt::request(0, 0, 4000)}, 0.95, 1.0).cpuBound());  // no GPU asked
  // Tight: from 0.9x up to bound.
  CHECK(cpuHeavyMix(30.0).cpuLoad() == Approx(1.0));
  CHECK(cpuHeavyMix(30.0).cpuTight());
  CHECK(cpuHeavyMix(33.0).cpuTight());  // 30 >= 0.9 x 33
  CHECK(cpuHeavyMix(28.5).cpuTight());
  CHECK_FALSE(cpuHeavyMix(34.0).cpuTight());
  CHECK_FALSE(cpuHeavyMix(28.0).cpuTight());  // bound, not tight
  CHECK_FALSE(cpuHeavyMix(0).cpuTight());

  // The window judges each rebuilt mix against the cluster it was last told of, and replaces the
  // current mix (a new one, so memoised scores go) when a node change flips the verdict.
  troupe::sched::RequestMixWindow window(100, 1000);
  window.setClusterCpuPerGpu(27.0);
  window.record(tt::request(1, 1000, 10000));
  window.record(tt::request(0, 0, 20000));
  window.refresh();
  const auto bound = window.current();
  CHECK(bound->cpuBound());
  window.setClusterCpuPerGpu(20.0);  // still bound: the same mix
  CHECK(window.current() == bound);
  window.setClusterCpuPerGpu(30.0);  // tight now: another regime, another mix
  const auto tight = window.current();
  CHECK(tight != bound);
  CHECK(tight->cpuTight());
  window.setClusterCpuPerGpu(40.0);
  CHECK(window.current() != tight);
  CHECK_FALSE(window.current()->cpuBound());
  CHECK_FALSE(window.current()->cpuTight());
  CHECK(window.current()->entries().size() == bound->entries().size());
}

TEST_CASE("troupe: a CPU-only pod goes where the GPUs are all taken, then to smaller nodes",
          "[policy][troupe]") {
  tt::SmallCluster c;
  troupe::model::NodeState& full = c.add("full", 8, "NVIDIA-L4", "96");
  tt::SmallCluster::use(full, {0, 1, 2, 3, 4, 5, 6, 7});
  c.add("idle-small", 2, "NVIDIA-L4", "96");
  c.add("idle-big", 8, "NVIDIA-L4", "96");
  // Whole GPUs only: the pack term is off for GPU pods, and CPU left strands nothing here.
  const RequestMix mix = wholeGpuMix();
  const troupe::sched::ScoreContext context{&mix, nullptr};
  const auto policy = tt::builtin("troupe");
  const auto cpu_only = tt::request(0, 0, 4000);
  CHECK(c.best(*policy, cpu_only, context) == "full");  // its CPU strands no GPU there
  tt::SmallCluster rest;
  rest.add("idle-big", 8, "NVIDIA-L4", "96");
  rest.add("idle-small", 2, "NVIDIA-L4", "96");
  CHECK(rest.best(*policy, cpu_only, context) == "idle-small");
  // A GPU pod in the same mix ignores node size (the seeded order decides).
  CHECK(rest.best(*policy, tt::request(1), context) == "idle-big");
  // While CPU runs out about when GPUs do (a CPU-tight mix), CPU-only pods go where the most GPU
  // is in use, even a bigger node, keeping CPU beside the free GPUs.
  tt::SmallCluster tight_cluster;
  tight_cluster.add("idle-small", 2, "NVIDIA-L4", "96");
  troupe::model::NodeState& busy = tight_cluster.add("busy-big", 8, "NVIDIA-L4", "96");
  tt::SmallCluster::use(busy, {0, 1, 2, 3, 4, 5});
  CHECK(tight_cluster.best(*policy, cpu_only, context) == "idle-small");
  const RequestMix tight = cpuHeavyMix(30.0);
  REQUIRE(tight.cpuTight());
  const troupe::sched::ScoreContext tight_context{&tight, nullptr};
  CHECK(tight_cluster.best(*policy, tt::request(0, 0, 4000), tight_context) == "busy-big");
}

TEST_CASE("troupe: while requests name GPU models, a CPU-tight CPU-only pod does not starve free GPUs of CPU",
          "[policy][troupe]") {
  // Both mixes ask 10 cores per GPU beside the GPUs (and 20-core CPU-only pods) on a cluster of 30
  // per GPU: CPU-tight. In the second the GPU pods name a GPU model, so model pressure steers the
  // unconstrained ones and the guard is on.
  auto tightMix = [](std::vector<std::string> models) {
    troupe::sched::GpuRequest gpu_pod = tt::request(1, 1000, 10000);
    gpu_pod.models = std::move(models);
    return RequestMix::fromRequests({gpu_pod, tt::request(0, 0, 20000)}, 0.95, 30.0);
  };
  const RequestMix unconstrained = tightMix({});
  const RequestMix constrained = tightMix({"NVIDIA-L4"});
  REQUIRE(unconstrained.cpuTight());
  REQUIRE(constrained.cpuTight());
  REQUIRE(constrained.gpuPodsCpuPerGpu() == Approx(10.0));
  REQUIRE_FALSE(constrained.constrained().empty());
  // Six of eight GPUs in use on both busy nodes; on "starved" the pods took 78 of 96 cores, so a
  // 4-core pod leaves 14, short of the 20 its two free GPUs want. "roomy" keeps 66 after it.
  tt::SmallCluster c;
  troupe::model::NodeState& idle_small = c.add("idle-small", 2, "NVIDIA-L4", "96");
  troupe::model::NodeState& starved = c.add("starved", 8, "NVIDIA-L4", "96");
  tt::SmallCluster::use(starved, {0, 1, 2, 3, 4, 5}, 1000, 78000);
  const auto policy = tt::builtin("troupe");
  const auto cpu_only = tt::request(0, 0, 4000);
  const troupe::sched::ScoreContext plain{&unconstrained, nullptr};
  const troupe::sched::ScoreContext guarded{&constrained, nullptr};
  CHECK(c.best(*policy, cpu_only, plain) == "starved");  // the most GPU in use wins
  CHECK(c.best(*policy, cpu_only, guarded) == "idle-small");
  CHECK(troupe::sched::hooksOf(*policy).shareClass(starved, cpu_only, guarded) == 1);
  CHECK(troupe::sched::hooksOf(*policy).shareClass(idle_small, cpu_only, guarded) == 0);
  CHECK(troupe::sched::hooksOf(*policy).shareClass(starved, cpu_only, plain) == 0);
  // A node it would not starve still goes first by the GPUs in use.
  troupe::model::NodeState& roomy = c.add("roomy", 8, "NVIDIA-L4", "96");
  tt::SmallCluster::use(roomy, {0, 1, 2, 3, 4, 5}, 1000, 26000);
  CHECK(c.best(*policy, cpu_only, guarded) == "roomy");
  // Past the tight band (CPU-bound) the exact fragmentation change decides instead; the guard is
  // not asked.
  const RequestMix bound = constrained.withClusterCpuPerGpu(27.0);
  REQUIRE(bound.cpuBound());
  const troupe::sched::ScoreContext bound_context{&bound, nullptr};
  CHECK(troupe::sched::hooksOf(*policy).shareClass(starved, cpu_only, bound_context) == 0);
}

TEST_CASE("troupe: while the mix is CPU-bound, the exact fragmentation change breaks the ties",
          "[policy][troupe]") {
  tt::SmallCluster c;
  troupe::model::NodeState& node = c.add("n", 4, "NVIDIA-L4", "64");
  tt::SmallCluster::use(node, {0}, 500, 30000);
  const auto policy = tt::builtin("troupe");
  const auto req = tt::request(1, 1000, 10000);
  const auto placement = policy->score(node, req, {}).placement;
  // The tie value under `mix` (the value less its fragmentation points) and the fragmentation
  // change; and the exact change's tie for that change.
  struct Tie {
    double value, delta;
  };
  auto tieUnder = [&](const RequestMix& mix) {
    const troupe::sched::ScoreContext context{&mix, nullptr};
    const troupe::sched::FragEval frag =
        troupe::sched::evalFragmentation(node, req, context, troupe::model::indicesToMask(placement.gpus));
    return Tie{policy->score(node, req, context).value - frag.points, frag.delta};
  };
  auto exactTie = [](double delta) { return 0.99 * (0.5 - 0.5 * delta / (std::abs(delta) + 1000.0)); };
  for (double cluster : {28.0, 28.5}) {
    const RequestMix mix = cpuHeavyMix(cluster);
    const Tie tie = tieUnder(mix);
    INFO("cluster CPU per GPU " << cluster << ", fragmentation change " << tie.delta);
    REQUIRE(tie.delta != 0.0);
    if (mix.cpuBound()) {
      CHECK(tie.value == Approx(exactTie(tie.delta)));
    } else {
      CHECK(tie.value != Approx(exactTie(tie.delta)));
    }
  }
  // While the CPU-bound mix also asks for whole nodes (an 8-GPU pod among its requests), the
  // exact change gives way to the usual blend: the same tie as where the mix is not CPU-bound.
  auto withWholeNodePods = [](double cluster) {
    std::vector<troupe::sched::GpuRequest> reqs(20, tt::request(1, 1000, 10000));
    reqs.insert(reqs.end(), 20, tt::request(0, 0, 20000));
    reqs.push_back(tt::request(8, 1000, 80000));
    return RequestMix::fromRequests(reqs, 0.95, cluster);
  };
  const RequestMix bound_whole = withWholeNodePods(28.0);
  REQUIRE(bound_whole.cpuBound());
  REQUIRE_FALSE(bound_whole.wholeNodeDemand().empty());
  const Tie tie = tieUnder(bound_whole);
  REQUIRE(tie.delta != 0.0);
  CHECK(tie.value != Approx(exactTie(tie.delta)));
  const RequestMix loose_whole = withWholeNodePods(40.0);
  REQUIRE_FALSE(loose_whole.cpuBound());
  CHECK(tie.value == Approx(tieUnder(loose_whole).value));
}

TEST_CASE("troupe: among equally fragmenting nodes a GPU pod goes where CPU and GPUs run out together",
          "[policy][troupe][balance]") {
  // Two 8-GPU nodes with four GPUs in use; on the first the pods took 80 of 96 cores, so its
  // free GPUs would soon be left without CPU.
  tt::SmallCluster c;
  troupe::model::NodeState& cpu_heavy = c.add("cpu-heavy", 8, "NVIDIA-L4", "96");
  tt::SmallCluster::use(cpu_heavy, {0, 1, 2, 3}, 1000, 80000);
  troupe::model::NodeState& even = c.add("even", 8, "NVIDIA-L4", "96");
  tt::SmallCluster::use(even, {0, 1, 2, 3}, 1000, 48000);
  // Whole GPUs with 2 cores each, on a cluster of 2.5 cores per GPU: the GPU pods' CPU load is
  // 0.8, so the term counts; both nodes keep 2 cores beside each free GPU, so fragmentation ties
  // them.
  const RequestMix mix = RequestMix::fromRequests({tt::request(1, 1000, 2000)}, 0.95, 2.5);
  REQUIRE(mix.gpuPodsCpuLoad() == Approx(0.8));
  REQUIRE_FALSE(mix.cpuTight());
  const troupe::sched::ScoreContext context{&mix, nullptr};
  const auto req = tt::request(1, 1000, 8000);
  const auto policy = tt::builtin("troupe");
  CHECK(c.best(*policy, req, context) == "even");
  // The class nodes share a value by: 1 + the CPU left after the pod, in whole percent.
  CHECK(troupe::sched::hooksOf(*policy).shareClass(even, req, context) == 1 + 41);      // 40 of 96 cores left
  CHECK(troupe::sched::hooksOf(*policy).shareClass(cpu_heavy, req, context) == 1 + 8);  // 8 of 96
  // Without the term the node order decides.
  troupe::sched::PolicyArgs off;
  off.troupe.balance_weight = 0;
  const auto no_balance = tt::builtin("troupe", off);
  CHECK(c.best(*no_balance, req, context) == "cpu-heavy");
  CHECK(troupe::sched::hooksOf(*no_balance).shareClass(even, req, context) == 0);
  // An untouched node counts as balanced 0.85: better than the lopsided node (0.71), worse than
  // the even one (0.96), so pods do not spread over empty nodes for balance alone.
  tt::SmallCluster with_empty_1;
  troupe::model::NodeState& heavy2 = with_empty_1.add("cpu-heavy", 8, "NVIDIA-L4", "96");
  tt::SmallCluster::use(heavy2, {0, 1, 2, 3}, 1000, 80000);
  with_empty_1.add("empty", 8, "NVIDIA-L4", "96");
  CHECK(with_empty_1.best(*policy, req, context) == "empty");
  tt::SmallCluster with_empty_2;
  with_empty_2.add("empty", 8, "NVIDIA-L4", "96");
  troupe::model::NodeState& even2 = with_empty_2.add("even", 8, "NVIDIA-L4", "96");
  tt::SmallCluster::use(even2, {0, 1, 2, 3}, 1000, 48000);
  CHECK(with_empty_2.best(*policy, req, context) == "even");
  // Where CPU is plentiful (the same requests on a cluster of 10 cores per GPU: load 0.2) CPU and
  // GPUs do not run out together anyway: the term is off and the node order decides.
  const RequestMix plenty = RequestMix::fromRequests({tt::request(1, 1000, 2000)}, 0.95, 10.0);
  REQUIRE(plenty.gpuPodsCpuLoad() == Approx(0.2));
  const troupe::sched::ScoreContext plenty_context{&plenty, nullptr};
  CHECK(c.best(*policy, req, plenty_context) == "cpu-heavy");
  CHECK(troupe::sched::hooksOf(*policy).shareClass(even, req, plenty_context) == 0);
  // What counts is the GPU pods' own CPU: CPU-only pods of 6 cores raise the whole mix's load to
  // 0.8 (8 cores per GPU against 10), yet the GPU pods ask 0.2 of it and the term stays off.
  const RequestMix cpu_only_heavy =
      RequestMix::fromRequests({tt::request(1, 1000, 2000), tt::request(0, 0, 6000)}, 0.95, 10.0);
  REQUIRE(cpu_only_heavy.cpuLoad() == Approx(0.8));
  REQUIRE(cpu_only_heavy.gpuPodsCpuLoad() == Approx(0.2));
  const troupe::sched::ScoreContext cpu_only_context{&cpu_only_heavy, nullptr};
  CHECK(c.best(*policy, req, cpu_only_context) == "cpu-heavy");
  // While the mix is CPU-bound the exact fragmentation change decides instead (test above): the
  // balance is off and adds no class.
  const RequestMix bound = cpuHeavyMix(27.0);
  REQUIRE(bound.cpuBound());
  const troupe::sched::ScoreContext bound_context{&bound, nullptr};
  CHECK(troupe::sched::hooksOf(*policy).shareClass(even, req, bound_context) == 0);
}

TEST_CASE("troupe: the whole-node penalty counts the CPU an 8-GPU pod needs beside its GPUs",
          "[policy][troupe][whole-node]") {
  using troupe::sched::WholeNodePressure;
  tt::SmallCluster cluster;
  troupe::model::NodeState& whole = cluster.add("whole", 8, "NVIDIA-L4", "96");
  troupe::model::NodeState& starved = cluster.add("starved", 8, "NVIDIA-L4", "96");
  tt::SmallCluster::use(starved, {}, 0, 70000);  // CPU-only pods took 70 of its 96 cores
  const auto troupe = troupe::sched::builtinPolicies().create("troupe").value();
  // The 8-GPU pods of the window ask 64 cores at least.
  const WholeNodePressure pressure = WholeNodePressure::compute(0.1, 160000, 1, 64000);
  auto cpuOnly = [](int64_t cpu) {
    troupe::sched::GpuRequest r;
    r.cpu_milli = cpu;
    return r;
  };
  // A CPU-only pod that leaves the whole node too little CPU for one pays as a GPU pod does;
  // one that leaves enough does not.
  CHECK(troupe->wholeNodePenalty(whole, cpuOnly(40000), pressure) > 0.0);
  CHECK(troupe->wholeNodePenalty(whole, cpuOnly(20000), pressure) == 0.0);
  // The starved node's free GPUs are no room for an 8-GPU pod: a 1-GPU pod fills them freely.
  troupe::sched::GpuRequest one = tt::request(1);
  one.cpu_milli = 4000;
  CHECK(troupe->wholeNodePenalty(starved, one, pressure) == 0.0);
  CHECK(troupe->wholeNodePenalty(whole, one, pressure) > 0.0);
}
