// gang_plan_bench: how long planGang takes to place one gang on a large racked cluster, with
// and without the topology annotations. Pure core, no I/O. See bench/README.md.
//   build/bench/gang_plan_bench [--nodes N] [--members M] [--gpus G] [--runs R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/model/topology_levels.h"
#include "troupe/sched/gang/gang_planner.h"

using namespace troupe;

int main(int argc, char** argv) {
  int nodes = 5000, members = 32, gpus = 8, runs = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--nodes")
      nodes = v;
    else if (flag == "--members")
      members = v;
    else if (flag == "--gpus")
      gpus = v;
    else if (flag == "--runs")
      runs = v;
    else {
      std::fprintf(stderr, "unknown flag %s; expected --nodes, --members, --gpus or --runs\n", flag.c_str());
      return 2;
    }
  }
  // 8 nodes a rack, 8 racks a block, blocks round-robin over 4 zones; every third node has
  // half of its GPUs in use, so racks differ.
  const std::vector<std::string>& levels = model::defaultTopologyLevels();
  model::TopologyCatalog catalog;
  std::vector<model::NodeState> states;
  states.reserve(static_cast<size_t>(nodes));
  for (int i = 0; i < nodes; ++i) {
    model::NodeFacts f;
    f.name = "n" + std::to_string(i);
    f.allocatable_gpus = "8";
    f.labels[model::kLabelGpuProduct] = "NVIDIA-H100-80GB-HBM3";
    const int rack = i / 8, block = rack / 8;
    f.labels["topology.kubernetes.io/zone"] = "z" + std::to_string(block % 4);
    f.labels["troupe.dev/block"] = "b" + std::to_string(block);
    f.labels["troupe.dev/rack"] = "r" + std::to_string(rack);
    Result<model::NodeInfo> info = model::nodeFromFacts(f, catalog);
    if (!info.isOk()) return 1;
    info.value().topology_domains = model::topologyDomains(f.labels, levels);
    states.emplace_back(std::move(info).value());
    if (i % 3 == 0) {
      model::Allocation a;
      a.pod_uid = "busy-" + f.name;
      a.node = f.name;
      a.gpus = {0, 1, 2, 3};
      (void)states.back().add(a);
    }
  }
  std::vector<const model::NodeState*> view;
  for (const model::NodeState& s : states) view.push_back(&s);

  std::printf("gang_plan_bench: %d nodes, gang of %d members x %d GPUs, %d runs\n", nodes, members, gpus,
              runs);
  struct Case {
    const char* name;
    int required, preferred;
    bool use_levels;
  } cases[] = {{"levels off", -1, -1, false},
               {"no annotation", -1, -1, true},
               {"preferred: rack", -1, 2, true},
               {"required: block", 1, -1, true}};
  const std::vector<std::string> no_levels;
  for (const Case& c : cases) {
    sched::GpuRequest req;
    req.gpus = gpus;
    req.topology_required = c.required;
    req.topology_preferred = c.preferred;
    std::vector<double> ms;
    size_t slots = 0;
    for (int r = 0; r < runs; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      sched::GangPlanResult plan =
          sched::planGang(view, req, members, "bench/g", c.use_levels ? levels : no_levels);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      slots = plan.slots.size();
    }
    std::sort(ms.begin(), ms.end());
    std::printf("  %-16s slots %3zu  p50 %8.2f ms  max %8.2f ms\n", c.name, slots, ms[ms.size() / 2],
                ms.back());
  }
  return 0;
}
