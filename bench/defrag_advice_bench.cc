// defrag_advice_bench: how long planDefragAdvice takes for one pending 8-GPU pod (and gangs of
// 2 and 4 x 8 GPUs) on a large cluster where every node has some GPUs in use, so nothing fits as is.
// Pure core, no I/O. See bench/README.md.
//   build/bench/defrag_advice_bench [--nodes N] [--runs R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/model/topology_levels.h"
#include "troupe/sched/defrag/defrag_advice.h"
#include "troupe/sched/policies/policy_registry.h"

using namespace troupe;

int main(int argc, char** argv) {
  int nodes = 5000, runs = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--nodes")
      nodes = v;
    else if (flag == "--runs")
      runs = v;
    else {
      std::fprintf(stderr, "unknown flag %s; expected --nodes or --runs\n", flag.c_str());
      return 2;
    }
  }
  // Each node holds 1- and 2-GPU pods on 3 to 7 of its 8 GPUs: nothing fits an 8-GPU pod, and
  // freeing a node takes 2 to 7 moves, so only the lightest nodes can be freed within 4.
  std::mt19937 rng(7);
  model::TopologyCatalog catalog;
  std::vector<model::NodeState> states;
  states.reserve(static_cast<size_t>(nodes));
  int pods = 0;
  for (int i = 0; i < nodes; ++i) {
    model::NodeFacts f;
    f.name = "n" + std::to_string(100000 + i);
    f.allocatable_gpus = "8";
    f.labels[model::kLabelGpuProduct] = "NVIDIA-H100-80GB-HBM3";
    Result<model::NodeInfo> info = model::nodeFromFacts(f, catalog);
    if (!info.isOk()) return 1;
    states.emplace_back(std::move(info).value());
    const int used = 3 + static_cast<int>(rng() % 5);
    for (int g = 0; g < used;) {
      const int size = (g + 2 <= used && rng() % 2) ? 2 : 1;
      model::Allocation a;
      a.pod_uid = "p" + std::to_string(pods++);
      a.node = f.name;
      for (int k = 0; k < size; ++k) a.gpus.push_back(g + k);
      (void)states.back().add(a);
      g += size;
    }
  }
  std::vector<const model::NodeState*> view;
  for (const model::NodeState& s : states) view.push_back(&s);
  const sched::PolicyPtr policy = sched::builtinPolicies().create("troupe").value();

  std::printf("defrag_advice_bench: %d nodes, %d running pods, %d runs\n", nodes, pods, runs);
  for (int members : {1, 2, 4}) {
    sched::DefragInput in;
    in.nodes = view;
    in.policy = policy.get();
    in.topology_levels = model::defaultTopologyLevels();
    sched::DefragAsk ask;
    ask.key = "bench/p";
    ask.request.gpus = 8;
    ask.members = members;
    std::vector<double> ms;
    sched::DefragAdvice advice;
    for (int r = 0; r < runs; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      advice = sched::planDefragAdvice(ask, in);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("  %d x 8 GPUs: p50 %.1f ms, max %.1f ms; %s, %d moves, %d GPUs freed%s%s\n", members,
                ms[ms.size() / 2], ms.back(),
                advice.outcome == sched::DefragAdvice::Outcome::kPlan ? "plan" : "no plan", advice.moves,
                advice.freedGpus(), advice.reason.empty() ? "" : ": ", advice.reason.c_str());
  }
  return 0;
}
