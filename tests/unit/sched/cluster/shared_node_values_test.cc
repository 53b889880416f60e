// SharedNodeValues: a node's shared value is exactly nodeValue's, and the node narrowing picks
// from shared values is the node it picks from values computed one by one, on randomised
// clusters (profiles, GPU counts, whole and shared GPUs, unknown holders, CPU, request mixes).
#include "troupe/sched/cluster/shared_node_values.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/model/gpu_selection.h"
#include "troupe/sched/policies/policy_registry.h"
#include "troupe/sched/scheduler/scheduler.h"
#include "troupe/sched/score/best_node.h"
#include "troupe/sched/score/placement.h"

namespace {

using troupe::model::Allocation;
using troupe::model::NodeFacts;
using troupe::model::NodeState;
using troupe::model::TopologyCatalog;
using troupe::sched::GpuRequest;
using troupe::sched::Misfit;
using troupe::sched::PolicyConfig;
using troupe::sched::RequestMix;
using troupe::sched::ScoreContext;
using troupe::sched::SharedNodeValues;
using troupe::sched::TopologyMode;
using troupe::testing::gpuNode;

const char* kDgx1Matrix =
    R"([["X","NV1","NV1","NV2","NV2","SYS","SYS","SYS"],
        ["NV1","X","NV2","NV1","SYS","NV2","SYS","SYS"],
        ["NV1","NV2","X","NV2","SYS","SYS","NV1","SYS"],
        ["NV2","NV1","NV2","X","SYS","SYS","SYS","NV1"],
        ["NV2","SYS","SYS","SYS","X","NV1","NV1","NV2"],
        ["SYS","NV2","SYS","SYS","NV1","X","NV2","NV1"],
        ["SYS","SYS","NV1","SYS","NV1","NV2","X","NV2"],
        ["SYS","SYS","SYS","NV1","NV2","NV1","NV2","X"]])";

struct Rng {
  uint64_t state;
  uint64_t next(uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  }
};

// A node of a random kind: the bench's three profiles, a 4-GPU PCIe box, a profile label, a
// link matrix annotation (a topology of its own).
NodeFacts randomFacts(Rng& rng, const std::string& name) {
  NodeFacts f;
  switch (rng.next(8)) {
    case 0:
    case 1:
    case 2: f = gpuNode(name, 8, "NVIDIA-H100-80GB-HBM3"); break;
    case 3: f = gpuNode(name, 8, "NVIDIA-A100-SXM4-80GB"); break;
    case 4: f = gpuNode(name, 8, "NVIDIA-L40S"); break;
    case 5: f = gpuNode(name, 4, "NVIDIA-L40S"); break;
    case 6:
      f = gpuNode(name, 8, "NVIDIA-L40S");
      f.labels["troupe.dev/topology-profile"] = "pcie-nvbridge-8";
      break;
    case 7:
      f = gpuNode(name, 8, "Tesla-V100-SXM2-32GB");
      f.annotations["troupe.dev/gpu-topology"] = kDgx1Matrix;
      break;
  }
  if (rng.next(2)) f.cpu = std::to_string(32 + 32 * rng.next(3));  // else CPU is not tracked
  return f;
}

// Occupancy: mostly a few common patterns (so states repeat, as in real clusters), sometimes
// random whole sets, shares of a GPU, GPUs held at unknown indices and CPU.
void occupy(Rng& rng, NodeState& node, const std::string& uid_prefix, std::vector<Allocation>* made) {
  const int gpus = node.gpuCount();
  int pod = 0;
  auto place = [&](Allocation a) {
    a.pod_uid = uid_prefix + "-" + std::to_string(pod++);
    a.pod_key = "default/" + a.pod_uid;
    a.node = node.info().name;
    if (node.info().cpu_milli > 0 && rng.next(2)) a.cpu_milli = 1000 * static_cast<int64_t>(1 + rng.next(12));
    if (node.add(a).isOk() && made) made->push_back(a);
  };
  const uint64_t pattern = rng.next(6);
  if (pattern == 0) return;  // empty
  if (pattern <= 2) {        // the first k GPUs in use
    const int k = static_cast<int>(rng.next(static_cast<uint64_t>(gpus) + 1));
    Allocation a;
    for (int g = 0; g < k; ++g) a.gpus.push_back(g);
    if (!a.gpus.empty()) place(a);
    return;
  }
  const int pods = static_cast<int>(1 + rng.next(4));
  for (int p = 0; p < pods; ++p) {
    Allocation a;
    const uint64_t kind = rng.next(5);
    if (kind == 0) {  // a share of one GPU
      a.gpus = {static_cast<int>(rng.next(static_cast<uint64_t>(gpus)))};
      a.milli_per_gpu = 100 * static_cast<int64_t>(1 + rng.next(9));
    } else if (kind == 1) {  // GPUs whose indices nobody told
      a.unknown_gpus = static_cast<int>(1 + rng.next(2));
    } else {  // a random set of whole GPUs
      const int k = 1 << rng.next(3);
      for (int g = 0; g < gpus && static_cast<int>(a.gpus.size()) < k; ++g) {
        if ((node.fullyFreeMask() >> g & 1) && rng.next(2)) a.gpus.push_back(g);
      }
      if (a.gpus.empty()) continue;
    }
    place(a);
  }
}

GpuRequest randomRequest(Rng& rng) {
  GpuRequest r;
  const int sizes[] = {1, 1, 2, 3, 4, 8};
  if (rng.next(5) == 0) {
    r.gpus = 1;
    r.milli_per_gpu = 100 * static_cast<int64_t>(1 + rng.next(9));
  } else {
    r.gpus = sizes[rng.next(6)];
  }
  const TopologyMode modes[] = {TopologyMode::kPreferred, TopologyMode::kNVLink, TopologyMode::kNone};
  r.topology = modes[rng.next(3)];
  if (rng.next(2)) r.cpu_milli = 1000 * static_cast<int64_t>(rng.next(24));
  if (rng.next(6) == 0) r.models = {rng.next(2) ? "NVIDIA-H100-80GB-HBM3" : "nvidia-l40s"};
  return r;
}

// The defaults, or a mix of random requests (CPU thresholds, model lists, shares).
std::shared_ptr<const RequestMix> randomMix(Rng& rng) {
  if (rng.next(3) == 0) return nullptr;
  std::vector<GpuRequest> requests;
  const int n = static_cast<int>(5 + rng.next(60));
  for (int i = 0; i < n; ++i) {
    GpuRequest r = randomRequest(rng);
    if (rng.next(8) == 0) r.gpus = 0;  // a CPU-only pod in the mix
    requests.push_back(r);
  }
  RequestMix mix = RequestMix::fromRequests(requests);
  // The cluster's CPU per GPU: unknown, or so that the mix's CPU load is 0.5-1.25 (troupe's
  // CPU-tight rules count from 0.9, its CPU-bound rule from 1.06).
  if (rng.next(3) != 0 && mix.cpuPerGpu() > 0) {
    mix = mix.withClusterCpuPerGpu(mix.cpuPerGpu() / (0.5 + static_cast<double>(rng.next(76)) / 100.0));
  }
  return std::make_shared<const RequestMix>(std::move(mix));
}

PolicyConfig randomPolicy(Rng& rng) {
  const std::string_view kinds[] = {"troupe", "troupe", "fgd", "binpack", "random"};
  const std::string_view kind = kinds[rng.next(5)];
  troupe::sched::PolicyArgs args;
  if (rng.next(2)) {
    args.troupe.pack_weight = static_cast<double>(rng.next(10));
    args.troupe.topology_weight = static_cast<double>(rng.next(10));
    args.troupe.domain_weight = 1 + static_cast<double>(rng.next(10));
    args.troupe.balance_weight = static_cast<double>(rng.next(3));  // 0: the balance term off
  }
  return troupe::sched::builtinPolicies().create(kind, args).value();
}

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("shared node values: every value and every choice equal nodeValue's on random clusters",
          "[scheduler][narrow][shared-values]") {
  size_t scored = 0, computed = 0;
  int choices = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    INFO("seed " << seed);
    Rng rng{seed * 0x9E3779B97F4A7C15ULL};
    TopologyCatalog catalog;
    std::vector<NodeState> states;
    const int n = static_cast<int>(20 + rng.next(180));
    states.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const std::string name = "node-" + std::to_string(seed) + "-" + std::to_string(i);
      auto info = troupe::model::nodeFromFacts(randomFacts(rng, name), catalog);
      REQUIRE(info.isOk());
      states.emplace_back(std::move(info).value());
      occupy(rng, states.back(), name, nullptr);
    }
    const std::shared_ptr<const RequestMix> mix = randomMix(rng);
    const ScoreContext context{mix.get(), nullptr};
    for (int call = 0; call < 6; ++call) {
      GpuRequest req = randomRequest(rng);
      // A CPU-only pod now and then: troupe ranks those by other rules (CPU-tight: GPUs in use,
      // and with model-limited requests in the mix, whether it starves free GPUs of CPU).
      if (rng.next(5) == 0) {
        req.gpus = 0;
        req.cpu_milli = 1000 * static_cast<int64_t>(1 + rng.next(24));
      }
      const PolicyConfig policy = randomPolicy(rng);
      std::vector<const NodeState*> fits;
      for (const NodeState& s : states) {
        if (troupe::sched::findMisfit(s, req) == Misfit::kNone) fits.push_back(&s);
      }
      SharedNodeValues shared(*policy, req, context);
      std::vector<double> direct(fits.size()), reused(fits.size());
      for (size_t i = 0; i < fits.size(); ++i) {
        direct[i] = policy->rankValue(*fits[i], req, context);
        reused[i] = shared.value(*fits[i]);
        INFO("node " << fits[i]->info().name << " gpus " << req.gpus << " milli " << req.milli_per_gpu);
        REQUIRE(sameBits(reused[i], direct[i]));
      }
      CHECK(troupe::sched::bestByValue(*policy, fits, reused) ==
            troupe::sched::bestByValue(*policy, fits, direct));
      if (!fits.empty()) ++choices;
      if (hooksOf(*policy).sharesNodeValues()) {
        scored += fits.size();
        computed += shared.computed();
      }
    }
  }
  CHECK(choices > 600);
  // The patterns repeat, so many nodes share a value (CPU and shares make the rest differ).
  CHECK(computed * 10 < scored * 9);
}

TEST_CASE("shared node values: a narrowing Scheduler picks the node scoring each node alone picks",
          "[scheduler][narrow][shared-values]") {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    INFO("seed " << seed);
    Rng rng{seed * 0xD1B54A32D192ED03ULL};
    troupe::sched::SchedulerConfig config;
    config.narrow_to_best = true;
    config.remember_scores = rng.next(2) == 0;
    troupe::sched::Scheduler scheduler(config);
    TopologyCatalog catalog;
    std::vector<NodeState> mirror;  // the same nodes and allocations, outside the Scheduler
    std::vector<std::string> names;
    const int n = static_cast<int>(30 + rng.next(120));
    mirror.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      names.push_back("n" + std::to_string(i));
      const NodeFacts facts = randomFacts(rng, names.back());
      REQUIRE(scheduler.upsertNode(facts).isOk());
      auto info = troupe::model::nodeFromFacts(facts, catalog);
      REQUIRE(info.isOk());
      mirror.emplace_back(std::move(info).value());
      std::vector<Allocation> made;
      occupy(rng, mirror.back(), names.back(), &made);
      for (const Allocation& a : made) REQUIRE(scheduler.recordAllocation(a).isOk());
    }
    // Candidates in a shuffled order, as kube-scheduler sends them.
    std::vector<size_t> order(names.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.next(i)]);
    std::vector<std::string> candidates;
    for (size_t i : order) candidates.push_back(names[i]);
    // Fewer filters than the mix window's refresh: the Scheduler scores against the defaults.
    for (int call = 0; call < 30; ++call) {
      GpuRequest req = randomRequest(rng);
      req.models.clear();
      troupe::sched::StringMap annotations;
      if (req.topology == TopologyMode::kNVLink) annotations["troupe.dev/gpu-topology"] = "nvlink";
      if (req.topology == TopologyMode::kNone) annotations["troupe.dev/gpu-topology"] = "none";
      troupe::sched::PodFacts pod =
          troupe::testing::gpuPod("p" + std::to_string(call), req.gpus, annotations);
      if (req.shared()) {
        pod.containers[0].limits.clear();
        pod.annotations["troupe.dev/gpu-milli"] = std::to_string(req.milli_per_gpu);
      }
      if (req.cpu_milli > 0) pod.containers[0].requests["cpu"] = std::to_string(req.cpu_milli) + "m";
      auto parsed = troupe::sched::parseGpuRequest(pod);
      REQUIRE(parsed.isOk());
      const troupe::sched::FilterResult out = scheduler.filter(pod, candidates);
      // The straightforward computation: every fitting node scored on its own, best by value.
      std::vector<const NodeState*> fits;
      for (size_t i : order) {
        if (troupe::sched::findMisfit(mirror[i], parsed.value()) == Misfit::kNone) fits.push_back(&mirror[i]);
      }
      std::vector<double> values(fits.size());
      const ScoreContext context{nullptr, nullptr};
      for (size_t i = 0; i < fits.size(); ++i) {
        values[i] = config.policy->rankValue(*fits[i], parsed.value(), context);
      }
      const int best = troupe::sched::bestByValue(*config.policy, fits, values);
      INFO("call " << call << " gpus " << req.gpus << " milli " << req.milli_per_gpu);
      if (best < 0) {
        CHECK(out.passed.empty());
      } else {
        REQUIRE(out.passed.size() == 1);
        CHECK(out.passed[0] == fits[static_cast<size_t>(best)]->info().name);
      }
      scheduler.forgetPod(pod.uid);
    }
  }
}

TEST_CASE("shared node values: nodes with more GPUs than a key holds are scored one by one",
          "[scheduler][narrow][shared-values]") {
  TopologyCatalog catalog;
  std::vector<NodeState> states;
  for (int i = 0; i < 3; ++i) {
    auto info = troupe::model::nodeFromFacts(gpuNode("big-" + std::to_string(i), 20, "NVIDIA-L4"), catalog);
    REQUIRE(info.isOk());
    states.emplace_back(std::move(info).value());
  }
  GpuRequest req;
  req.gpus = 1;
  const PolicyConfig policy;
  const ScoreContext context{nullptr, nullptr};
  SharedNodeValues shared(*policy, req, context);
  for (const NodeState& s : states) {
    CHECK(sameBits(shared.value(s), policy->rankValue(s, req, context)));
  }
  CHECK(shared.computed() == 3);  // the same state three times, computed three times
}

TEST_CASE(
    "shared node values: a CPU-only pod that would starve one node's free GPUs of CPU is not "
    "given its twin's value",
    "[scheduler][narrow][shared-values]") {
  // A CPU-tight mix with a model-limited GPU request (10 cores per GPU) and 20-core CPU-only
  // pods. Two 8-GPU nodes with five GPUs in use: a 4-core pod leaves 31 cores on one (its three
  // free GPUs want 30) and 29 on the other. Both reach the same CPU thresholds of the mix (10
  // and 20 cores, before and after the pod), so only the troupe policy's share class tells them
  // apart.
  GpuRequest gpu_pod;
  gpu_pod.gpus = 1;
  gpu_pod.cpu_milli = 10000;
  gpu_pod.models = {"NVIDIA-L4"};
  GpuRequest cpu_only;
  cpu_only.gpus = 0;
  cpu_only.cpu_milli = 20000;
  const RequestMix mix = RequestMix::fromRequests({gpu_pod, cpu_only}, 0.95, 30.0);
  REQUIRE(mix.cpuTight());
  TopologyCatalog catalog;
  std::vector<NodeState> states;
  for (int64_t used : {61000, 63000}) {
    NodeFacts facts = gpuNode("n-" + std::to_string(used), 8, "NVIDIA-L4");
    facts.cpu = "96";
    auto info = troupe::model::nodeFromFacts(facts, catalog);
    REQUIRE(info.isOk());
    states.emplace_back(std::move(info).value());
    Allocation a;
    a.pod_uid = "held-" + std::to_string(used);
    a.gpus = {0, 1, 2, 3, 4};
    a.cpu_milli = used;
    REQUIRE(states.back().add(a).isOk());
  }
  GpuRequest req;
  req.gpus = 0;
  req.cpu_milli = 4000;
  const PolicyConfig policy = troupe::sched::builtinPolicies().create("troupe", {}).value();
  const ScoreContext context{&mix, nullptr};
  const double roomy = policy->rankValue(states[0], req, context);
  const double starved = policy->rankValue(states[1], req, context);
  REQUIRE(roomy > starved);
  SharedNodeValues shared(*policy, req, context);
  CHECK(sameBits(shared.value(states[0]), roomy));
  CHECK(sameBits(shared.value(states[1]), starved));
}
