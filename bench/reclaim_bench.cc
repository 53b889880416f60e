// reclaim_bench: how long one reclaim round takes to plan (planReclaim) on a large cluster
// full of a preemptible queue's pods, while a queue guaranteed a share of the GPUs waits with
// more pods than it is owed. Reports plan time and victims chosen per second. Pure core, no
// I/O. See bench/README.md.
//   build/bench/reclaim_bench [--nodes N] [--runs R]   (default: 1,000 and 5,000 nodes)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "troupe/model/node.h"
#include "troupe/sched/queue/reclaim.h"

using namespace troupe;

namespace {

constexpr const char* kH100 = "NVIDIA-H100-80GB-HBM3";
const sched::QueueClock::time_point kNow = sched::QueueClock::time_point{} + std::chrono::hours(100);

struct Scenario {
  const char* name;
  int victim_gpus;    // GPUs per victim pod
  int victim_gang;    // members per victim gang (1: pods on their own)
  int waiting_gpus;   // GPUs per waiting pod
  int64_t owed_gpus;  // the waiting queue's guarantee (it holds nothing)
};

// Every node full of batch's pods; research guaranteed owed_gpus and asking for 25% more.
struct World {
  model::TopologyCatalog catalog;
  std::deque<model::NodeState> nodes;
  sched::ReclaimInput in;
};

void build(World& w, int node_count, const Scenario& s) {
  int64_t batch_milli = 0;
  int serial = 0;
  for (int n = 0; n < node_count; ++n) {
    model::NodeFacts f;
    f.name = "n" + std::to_string(100000 + n);
    f.allocatable_gpus = "8";
    f.labels[model::kLabelGpuProduct] = kH100;
    w.nodes.emplace_back(model::nodeFromFacts(f, w.catalog).value());
    for (int g = 0; g + s.victim_gpus <= 8; g += s.victim_gpus) {
      const int id = serial++;
      model::Allocation a;
      a.pod_uid = "b" + std::to_string(id);
      a.pod_key = "batch/b" + std::to_string(id);
      a.node = f.name;
      for (int k = 0; k < s.victim_gpus; ++k) a.gpus.push_back(g + k);
      (void)w.nodes.back().add(a);
      sched::QueuedPod p;
      p.uid = a.pod_uid;
      p.key = a.pod_key;
      p.queue = "batch";
      p.gang = s.victim_gang > 1 ? "batch/g" + std::to_string(id / s.victim_gang) : "";
      p.milli = 1000L * s.victim_gpus;
      p.node = f.name;
      p.product = kH100;
      p.since = kNow - std::chrono::minutes(10 + id % 997);
      w.in.pods.push_back(p);
      batch_milli += p.milli;
    }
  }
  const int64_t owed = s.owed_gpus * 1000;
  sched::QueueStatus batch;
  batch.spec.name = "batch";
  batch.spec.preemptible = true;
  batch.allocated_milli = batch_milli;
  batch.allocated[kH100] = batch_milli;
  batch.fair_share.total_milli = batch_milli - owed;
  sched::QueueStatus research;
  research.spec.name = "research";
  research.spec.preemptible = false;
  research.spec.guaranteed.milli = owed;
  research.fair_share.total_milli = owed;
  w.in.queues = {batch, research};
  const int64_t waiting = (owed + owed / 4) / (1000L * s.waiting_gpus);
  for (int64_t i = 0; i < waiting; ++i) {
    sched::QueuedPod p;
    p.uid = "r" + std::to_string(i);
    p.key = "research/r" + std::to_string(i);
    p.queue = "research";
    p.milli = 1000L * s.waiting_gpus;
    p.since = kNow - std::chrono::seconds(i);
    w.in.pods.push_back(p);
  }
  for (const model::NodeState& n : w.nodes) w.in.nodes.push_back(&n);
  w.in.now = kNow;
  w.in.min_runtime = std::chrono::minutes(5);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {1000, 5000};
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--nodes")
      sizes = {v};
    else if (flag == "--runs")
      runs = std::max(1, v);
    else {
      std::fprintf(stderr, "unknown flag %s; expected --nodes or --runs\n", flag.c_str());
      return 2;
    }
  }
  const std::vector<Scenario> scenarios = {
      {"1-GPU victims, 1-GPU waiting pods, owed 512", 1, 1, 1, 512},
      {"1-GPU victims, 1-GPU waiting pods, owed 4000", 1, 1, 1, 4000},
      {"4 x 1-GPU victim gangs, 1-GPU waiting pods, owed 512", 1, 4, 1, 512},
      {"1-GPU victims, 8-GPU waiting pods, owed 512", 1, 1, 8, 512},
  };
  std::printf("reclaim_bench: one round, %d runs each (p50 / max)\n", runs);
  for (int nodes : sizes) {
    for (const Scenario& s : scenarios) {
      World w;
      build(w, nodes, s);
      std::vector<double> ms;
      size_t victims = 0, served = 0;
      for (int r = 0; r < runs; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        std::optional<sched::ReclaimPlan> plan = sched::planReclaim(w.in);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        victims = plan ? plan->victims.size() : 0;
        served = plan ? plan->served.size() : 0;
      }
      std::sort(ms.begin(), ms.end());
      const double p50 = ms[ms.size() / 2];
      std::printf("  %5d nodes, %-52s %5zu victims for %5zu pods: %7.1f / %7.1f ms, %8.0f victims/s\n", nodes,
                  s.name, victims, served, p50, ms.back(),
                  p50 > 0 ? 1000.0 * static_cast<double>(victims) / p50 : 0);
    }
  }
  return 0;
}
