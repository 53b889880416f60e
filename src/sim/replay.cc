#include "troupe/sim/replay.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <tuple>

#include "troupe/sched/policies/policy_hooks.h"
#include "troupe/sched/request/request_mix.h"
#include "troupe/sched/score/choose_node.h"
#include "troupe/sched/score/model_pressure.h"
#include "troupe/sched/score/placement.h"
#include "troupe/sched/score/whole_node_pressure.h"
#include "troupe/sim/defrag.h"
#include "troupe/sim/packing_floor.h"

namespace troupe::sim {
namespace {

// The mix a policy measures fragmentation against. FGD: the trace's own typical pods (the
// original list, before tuning), as in the paper. Troupe: the live extender's window of recent
// requests, started warm as a long-running extender's would be: filled with the trace's pods
// in creation (name) order, then updated with every arrival.
class MixSource {
 public:
  MixSource(const std::vector<TracePod>& pods, const sched::Policy& policy, bool cold, double cpu_per_gpu)
      : live_(cold || sched::hooksOf(policy).usesLiveMix()) {
    window_.setClusterCpuPerGpu(cpu_per_gpu);
    if (cold) return;  // a fresh extender: the defaults until the window's first refresh
    if (live_) {
      for (const TracePod& p : pods) window_.record(requestOf(p));
      window_.refresh();
    } else {
      std::vector<sched::GpuRequest> reqs;
      reqs.reserve(pods.size());
      for (const TracePod& p : pods) reqs.push_back(requestOf(p));
      fixed_ = std::make_shared<const sched::RequestMix>(
          sched::RequestMix::fromRequests(reqs, sched::RequestMix::kTypicalCoverage, cpu_per_gpu));
      cache_.emplace(*fixed_);
    }
  }
  void arrived(const sched::GpuRequest& req) {
    if (live_) window_.record(req);
  }
  sched::ScoreContext context() {
    std::shared_ptr<const sched::RequestMix> mix = live_ ? window_.current() : fixed_;
    if (!mix) return {};
    if (mix != current_) {
      current_ = mix;  // emplace replaces the old mix's cache
      cache_.emplace(*mix);
      ++epoch_;
    }
    return {current_.get(), &*cache_};
  }
  // Changes whenever the mix does, so scores computed against an older mix are not reused.
  uint32_t epoch() const { return epoch_; }

 private:
  bool live_;
  sched::RequestMixWindow window_;
  std::shared_ptr<const sched::RequestMix> fixed_;
  std::shared_ptr<const sched::RequestMix> current_;
  std::optional<sched::FragmentationCache> cache_;
  uint32_t epoch_ = 1;
};

// Pods of one shape get the same verdict and score on a node until the node changes (or the
// mix does), and each pod changes one node: remembering them per (node, shape) saves almost
// every findMisfit and score call without changing any result.
struct Memo {
  uint32_t version = 0;  // the node's version the verdict is for; 0 = none
  uint32_t epoch = 0;    // the mix epoch the score is for; 0 = not scored
  bool fits = false;
  sched::NodeScore score;
};

std::vector<int> shapeIds(const std::vector<sched::GpuRequest>& requests, int* count) {
  std::map<std::tuple<int64_t, int64_t, int, int64_t, std::vector<std::string>>, int> ids;
  std::vector<int> out;
  out.reserve(requests.size());
  for (const sched::GpuRequest& r : requests) {
    auto key = std::make_tuple(r.cpu_milli, r.memory_bytes, r.gpus, r.milli_per_gpu, r.models);
    out.push_back(ids.emplace(key, static_cast<int>(ids.size())).first->second);
  }
  *count = static_cast<int>(ids.size());
  return out;
}

// The memos of every (node, pod shape) pair, and each node's version (bumped when a pod lands).
class MemoTable {
 public:
  MemoTable(const std::vector<sched::GpuRequest>& requests, size_t nodes)
      : shape_of_(shapeIds(requests, &shape_count_)),
        version_(nodes, 1),
        memo_(nodes * static_cast<size_t>(shape_count_)) {}
  Memo& of(size_t node, int pod) {
    return memo_[node * static_cast<size_t>(shape_count_) +
                 static_cast<size_t>(shape_of_[static_cast<size_t>(pod)])];
  }
  // The nodes where the pod fits, from the memo where the node has not changed since.
  void feasible(const std::vector<model::NodeState>& nodes, const sched::GpuRequest& req, int pod,
                std::vector<size_t>* out) {
    out->clear();
    for (size_t i = 0; i < nodes.size(); ++i) {
      Memo& m = of(i, pod);
      if (m.version != version_[i]) {
        m.version = version_[i];
        m.epoch = 0;
        m.fits = sched::findMisfit(nodes[i], req) == sched::Misfit::kNone;
      }
      if (m.fits) out->push_back(i);
    }
  }
  void changed(size_t node) { ++version_[node]; }

 private:
  int shape_count_ = 0;
  std::vector<int> shape_of_;
  std::vector<uint32_t> version_;
  std::vector<Memo> memo_;
};

// The pressures' inputs, kept as pods land: free milli-GPU per product (the model-scarcity
// term's), and free milli-GPU and whole-node slots in all (the whole-node pressure's).
struct FreeCapacity {
  std::vector<std::pair<std::string, int64_t>> by_product;
  std::vector<size_t> product_of;  // per node: its index in by_product
  int64_t milli = 0;
  std::vector<int64_t> slot_cpu;     // the whole-node demand levels' CPU (RequestMix::wholeNodeDemand)
  std::vector<int64_t> whole_slots;  // per level: the slots with that much CPU

  explicit FreeCapacity(const std::vector<model::NodeState>& nodes) : product_of(nodes.size()) {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const model::NodeInfo& info = nodes[i].info();
      auto [it, added] = index.try_emplace(info.gpu_product, by_product.size());
      if (added) by_product.emplace_back(info.gpu_product, 0);
      product_of[i] = it->second;
      by_product[it->second].second += static_cast<int64_t>(info.gpu_count) * model::kMilliPerGpu;
    }
    for (const model::NodeState& n : nodes) milli += n.freeMilliTotal();
  }
  // The whole-node pressure of `mix`; the slots are recounted when its levels' CPU changed
  // (rarely: the window's whole-node requests keep their few CPU sizes).
  sched::WholeNodePressure wholeNodePressure(const std::vector<model::NodeState>& nodes,
                                             const sched::RequestMix& mix) {
    const std::vector<sched::WholeNodeDemand>& demand = mix.wholeNodeDemand();
    std::vector<int64_t> cpu;
    for (const sched::WholeNodeDemand& d : demand) cpu.push_back(d.cpu_milli);
    if (cpu != slot_cpu) {
      slot_cpu = std::move(cpu);
      whole_slots.assign(slot_cpu.size(), 0);
      for (const model::NodeState& n : nodes) {
        for (size_t i = 0; i < slot_cpu.size(); ++i)
          whole_slots[i] += sched::WholeNodePressure::slotsOf(n, slot_cpu[i]);
      }
    }
    return sched::WholeNodePressure::compute(demand, milli, whole_slots);
  }
  // The node's slots per level, before and after a placement.
  std::vector<int> slotsOf(const model::NodeState& node) const {
    std::vector<int> out;
    for (int64_t cpu : slot_cpu) out.push_back(sched::WholeNodePressure::slotsOf(node, cpu));
    return out;
  }
  // A pod landed on `node`, whose slots per level were `before` and are now `after`.
  void placed(size_t node, const sched::GpuRequest& req, const std::vector<int>& before,
              const std::vector<int>& after) {
    for (size_t i = 0; i < whole_slots.size(); ++i) whole_slots[i] += after[i] - before[i];
    if (!req.wantsGpus()) return;
    milli -= req.totalMilli();
    by_product[product_of[node]].second -= req.totalMilli();
  }
};

// The allocation of the replay's pod number `step`.
model::Allocation allocationOf(size_t step, const sched::GpuRequest& req, const sched::Placement& placement) {
  model::Allocation a;
  a.pod_uid = std::to_string(step);
  a.gpus = placement.gpus;
  a.milli_per_gpu = req.milli_per_gpu;
  a.cpu_milli = req.cpu_milli;
  a.memory_bytes = req.memory_bytes;
  a.topology_quality = placement.topology_quality;
  return a;
}

// A uniformly random GPU of the node that fits the share, by reservoir sampling on the run's stream.
void drawSharedGpu(const model::NodeState& node, const sched::GpuRequest& req, GoRandom& rng,
                   sched::Placement* placement) {
  int seen = 0;
  for (int g = 0; g < node.gpuCount(); ++g) {
    if (node.gpuFreeMilli(g) < req.milli_per_gpu) continue;
    if (rng.intn(++seen) == 0) placement->gpus = {g};
  }
}

// Counts a placed pod, and a multi-GPU one by whether its GPU set is the best the node allows.
void countPlaced(const sched::GpuRequest& req, const sched::Placement& placement, RunResult* result) {
  ++result->placed;
  if (req.gpus > 1) {
    ++result->multi_gpu_placed;
    if (placement.best_possible) ++result->multi_gpu_best;
  }
}

// Counts a pod that arrived before the cluster's capacity did, by size class.
void tallyBySize(const sched::GpuRequest& req, bool placed, RunResult* result) {
  SizeTally& t = result->by_size[static_cast<size_t>(sizeClassOf(req))];
  ++t.pods;
  t.milli += req.wantsGpus() ? req.totalMilli() : 0;
  if (!placed) {
    ++t.failed;
  } else if (req.wantsGpus()) {
    t.placed_milli += req.totalMilli();
  }
}

// kube-scheduler's NodeResourcesFit: CPU, memory, and whole GPUs counted as nvidia.com/gpu
// requests (shares are invisible to it).
bool kubeFitsSomewhere(const std::vector<model::NodeState>& nodes, const sched::GpuRequest& req) {
  for (const model::NodeState& node : nodes) {
    const model::NodeInfo& info = node.info();
    if (node.cpuUsed() + req.cpu_milli > info.cpu_milli) continue;
    if (node.memoryUsed() + req.memory_bytes > info.memory_bytes) continue;
    if (req.wantsGpus() && !req.shared()) {
      int64_t requested = 0;
      for (const auto& [uid, a] : node.allocations()) {
        if (a.milli_per_gpu >= model::kMilliPerGpu) requested += static_cast<int64_t>(a.gpus.size());
      }
      if (requested + req.gpus > info.gpu_count) continue;
    }
    return true;
  }
  return false;
}

// The advisor on a copy of `nodes`: one greedy run for the largest budget, read off for each.
DefragOutcome adviseAt(const std::vector<model::NodeState>& nodes, const ReplayInput& in,
                       const std::vector<sched::GpuRequest>& requests, const std::vector<int>& order,
                       const sched::ScoreContext& policy_context) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<model::NodeState> copy = nodes;
  // Every policy is measured against the same mix, the trace's typical pods, so the numbers
  // compare across policies (troupe's own live window would differ per run).
  const sched::RequestMix mix = sched::RequestMix::fromRequests(requests);
  sched::FragmentationCache measure(mix);
  DefragInput input;
  input.policy = &*in.policy;
  input.policy_context = policy_context;
  input.measure = &measure;
  input.request_of = [&](const model::Allocation& a) {
    return requests[static_cast<size_t>(order[std::stoul(a.pod_uid)])];
  };
  input.max_moves = *std::max_element(in.defrag_moves.begin(), in.defrag_moves.end());
  DefragOutcome out;
  for (const model::NodeState& n : nodes) {
    for (int g = 0; g < n.gpuCount(); ++g) out.free_gpus += static_cast<double>(n.gpuFreeMilli(g));
  }
  out.free_gpus /= model::kMilliPerGpu;
  const DefragPlan plan = planDefrag(copy, input);
  out.fragmented_before = plan.before_milli / model::kMilliPerGpu;
  for (int k : in.defrag_moves) {
    const size_t made = std::min(plan.moves.size(), static_cast<size_t>(k));
    double after = plan.before_milli;
    for (size_t i = 0; i < made; ++i) after -= plan.moves[i].gain_milli;
    out.k.push_back(k);
    out.moves.push_back(static_cast<int>(made));
    out.fragmented_after.push_back(after / model::kMilliPerGpu);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// The hindsight packing of the first `count` pods of the run.
int64_t floorOf(const std::vector<sched::GpuRequest>& requests, const std::vector<int>& order, size_t count,
                int64_t gpus) {
  std::vector<const sched::GpuRequest*> arrived;
  arrived.reserve(count);
  for (size_t i = 0; i < count; ++i) arrived.push_back(&requests[static_cast<size_t>(order[i])]);
  return hindsightIdleMilli(arrived, gpus);
}

}  // namespace

SizeClass sizeClassOf(const sched::GpuRequest& req) {
  if (!req.wantsGpus()) return SizeClass::kCpu;
  if (req.shared()) return SizeClass::kShare;
  if (req.gpus >= 8) return SizeClass::kEight;
  if (req.gpus >= 4) return SizeClass::kFour;
  if (req.gpus >= 2) return SizeClass::kTwo;
  return SizeClass::kOne;
}

std::string_view sizeClassName(size_t cls) {
  static constexpr std::array<std::string_view, kSizeClasses> kNames = {"cpu", "share", "1", "2", "4", "8+"};
  return cls < kNames.size() ? kNames[cls] : std::string_view("?");
}

RunResult replay(const ReplayInput& in) {
  const auto start = std::chrono::steady_clock::now();
  const Cluster& cluster = *in.cluster;
  const std::vector<TracePod>& pods = *in.sorted_pods;
  std::vector<std::string> node_names;
  for (const model::NodeInfo& info : cluster.nodes) node_names.push_back(info.name);
  RunPlan plan = in.in_order ? planInOrder(static_cast<int>(pods.size()), node_names, in.seed)
                             : planRun(pods, static_cast<int>(cluster.nodes.size()), cluster.gpu_milli(),
                                       in.seed, in.tune_ratio);
  GoRandom& rng = plan.random;

  std::vector<model::NodeState> nodes;
  nodes.reserve(cluster.nodes.size());
  for (const model::NodeInfo& info : cluster.nodes) nodes.emplace_back(info);
  std::vector<sched::GpuRequest> requests;
  requests.reserve(pods.size());
  for (const TracePod& p : pods) requests.push_back(requestOf(p));

  RunResult result;
  result.policy = std::string(in.policy.name());
  result.seed = in.seed;
  result.capacity_gpus = cluster.gpus;
  result.pods = static_cast<int>(plan.order.size());
  result.clones = plan.clones;
  result.curve.reserve(plan.order.size());
  const sched::Policy& policy = *in.policy;
  MixSource mix(pods, policy, in.in_order, cluster.cpuPerGpu());
  const sched::TieBreak ties = in.in_order ? sched::TieBreak::kNodeOrder : policy.tieBreak();
  const sched::Draw draw = [&rng](int n) { return rng.intn(n); };
  FreeCapacity free_now(nodes);
  sched::ModelPressure pressure;
  bool pressure_stale = true;
  uint32_t pressure_epoch = 0;
  int64_t arrived = 0, used = 0;
  std::vector<size_t> feasible;
  feasible.reserve(nodes.size());
  MemoTable memo(requests, nodes.size());

  for (size_t step = 0; step < plan.order.size(); ++step) {
    const int pod = plan.order[step];
    const sched::GpuRequest& req = requests[static_cast<size_t>(pod)];
    if (!result.floor_idle_milli && arrived + req.totalMilli() > cluster.gpu_milli()) {
      result.floor_idle_milli = floorOf(requests, plan.order, step, cluster.gpus);
    }
    arrived += req.wantsGpus() ? req.totalMilli() : 0;
    memo.feasible(nodes, req, pod, &feasible);
    // Live, a pod no node has room for by kube-scheduler's own count never reaches Troupe's
    // filter, so its request window does not see it either.
    if (!in.in_order || !feasible.empty() || kubeFitsSomewhere(nodes, req)) mix.arrived(req);
    std::optional<size_t> chosen;
    sched::Placement placement;
    if (!feasible.empty()) {
      const sched::ScoreContext ctx = mix.context();
      if (ctx.mix && (pressure_stale || pressure_epoch != mix.epoch())) {
        pressure = sched::ModelPressure::compute(*ctx.mix, free_now.by_product);
        pressure_stale = false;
        pressure_epoch = mix.epoch();
      }
      const sched::WholeNodePressure whole =
          ctx.mix ? free_now.wholeNodePressure(nodes, *ctx.mix) : sched::WholeNodePressure{};
      // The memo's score when it is for this node state and mix, else a fresh one.
      auto scoreOf = [&](size_t node) -> const sched::NodeScore& {
        Memo& m = memo.of(node, pod);
        if (m.epoch != mix.epoch()) {
          m.score = policy.score(nodes[node], req, ctx);
          m.epoch = mix.epoch();
        }
        return m.score;
      };
      const int k = sched::chooseNode(
          feasible.size(), policy, ties,
          [&](size_t i) {
            const model::NodeState& n = nodes[feasible[i]];
            return scoreOf(feasible[i]).value - policy.scarcityPenalty(n, req, pressure) -
                   (whole.empty() ? 0.0 : policy.wholeNodePenalty(n, req, whole));
          },
          [&](size_t i) { return plan.node_rank[feasible[i]]; }, draw);
      chosen = feasible[static_cast<size_t>(k)];
      placement = scoreOf(*chosen).placement;
    }
    if (chosen && sched::hooksOf(policy).drawsNode() && req.shared())
      drawSharedGpu(nodes[*chosen], req, rng, &placement);
    int placed_on = -1;
    if (chosen) {
      const std::vector<int> slots_before = free_now.slotsOf(nodes[*chosen]);
      if (nodes[*chosen].add(allocationOf(step, req, placement)).isOk()) {
        free_now.placed(*chosen, req, slots_before, free_now.slotsOf(nodes[*chosen]));
        memo.changed(*chosen);
        placed_on = static_cast<int>(*chosen);
        used += req.wantsGpus() ? req.totalMilli() : 0;
        pressure_stale = pressure_stale || req.wantsGpus();
        countPlaced(req, placement, &result);
      }
    }
    if (arrived <= cluster.gpu_milli()) tallyBySize(req, placed_on >= 0, &result);
    result.curve.push_back({arrived, used});
    result.node_of.push_back(placed_on);
    if (!in.defrag_moves.empty() && !result.defrag && arrived >= cluster.gpu_milli()) {
      result.defrag = adviseAt(nodes, in, requests, plan.order, mix.context());
    }
  }
  if (!result.floor_idle_milli && arrived >= cluster.gpu_milli()) {
    result.floor_idle_milli = floorOf(requests, plan.order, plan.order.size(), cluster.gpus);
  }
  if (!in.defrag_moves.empty() && !result.defrag) {
    result.defrag = adviseAt(nodes, in, requests, plan.order, mix.context());
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace troupe::sim
