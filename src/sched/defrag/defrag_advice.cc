#include "troupe/sched/defrag/defrag_advice.h"

#include <algorithm>
#include <bit>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "troupe/sched/gang/gang_planner.h"
#include "troupe/sched/score/placement.h"

namespace troupe::sched {
namespace {

// The input's nodes with copies of the ones a plan has changed; the input is never written.
class Overlay {
 public:
  explicit Overlay(const std::vector<const model::NodeState*>& nodes) : nodes_(nodes) {}
  size_t size() const { return nodes_.size(); }
  const model::NodeState& at(size_t i) const {
    auto it = copies_.find(i);
    return it != copies_.end() ? it->second : *nodes_[i];
  }
  model::NodeState& edit(size_t i) {
    auto it = copies_.find(i);
    if (it == copies_.end()) it = copies_.emplace(i, *nodes_[i]).first;
    return it->second;
  }
  std::vector<const model::NodeState*> view() const {
    std::vector<const model::NodeState*> out(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i) out[i] = &at(i);
    return out;
  }

 private:
  const std::vector<const model::NodeState*>& nodes_;
  std::unordered_map<size_t, model::NodeState> copies_;
};

bool usable(const model::NodeState& node) {
  return !node.info().unschedulable && node.info().dra_driver.empty() && node.gpuCount() > 0;
}

bool fitsOn(const model::NodeState& node, const GpuRequest& req) {
  return usable(node) && findMisfit(node, req) == Misfit::kNone && placeOnNode(node, req).has_value();
}

GpuRequest defaultRequestOf(const model::Allocation& a, const model::NodeState& from) {
  GpuRequest r;
  r.gpus = static_cast<int>(a.gpus.size());
  r.milli_per_gpu = a.milli_per_gpu;
  if (!from.info().gpu_product.empty()) r.models = {from.info().gpu_product};
  r.cpu_milli = a.cpu_milli;
  r.memory_bytes = a.memory_bytes;
  return r;
}

int64_t milliOf(const model::Allocation& a) { return static_cast<int64_t>(a.gpus.size()) * a.milli_per_gpu; }

// A way to free node `node`: take `pods` (allocations on it) elsewhere.
struct Freeing {
  size_t node = 0;
  std::vector<const model::Allocation*> pods;
  int64_t milli = 0;
};

bool better(const Freeing& a, const Freeing& b) {
  if (a.pods.size() != b.pods.size()) return a.pods.size() < b.pods.size();
  if (a.milli != b.milli) return a.milli < b.milli;
  if (a.node != b.node) return a.node < b.node;
  for (size_t i = 0; i < a.pods.size(); ++i) {
    if (a.pods[i]->pod_uid != b.pods[i]->pod_uid) return a.pods[i]->pod_uid < b.pods[i]->pod_uid;
  }
  return false;
}

class Planner {
 public:
  Planner(const DefragAsk& ask, const DefragInput& in) : ask_(ask), in_(in), overlay_(in.nodes) {}

  DefragAdvice run() {
    DefragAdvice out;
    if (!in_.policy) {
      out.reason = "no policy to place moved pods with";
      return out;
    }
    if (ask_.members <= 1) {
      for (size_t i = 0; i < overlay_.size(); ++i) {
        if (fitsOn(overlay_.at(i), ask_.request)) {
          out.outcome = DefragAdvice::Outcome::kFitsNow;
          return out;
        }
      }
      if (!freeOne(out)) return noPlan(out);
      out.outcome = DefragAdvice::Outcome::kPlan;
      return out;
    }
    for (;;) {
      const GangPlanResult g =
          planGang(overlay_.view(), ask_.request, ask_.members, ask_.key, in_.topology_levels);
      if (static_cast<int>(g.slots.size()) == ask_.members) {
        out.outcome = out.freed.empty() ? DefragAdvice::Outcome::kFitsNow : DefragAdvice::Outcome::kPlan;
        return out;
      }
      if (g.never_fits) {
        out.freed.clear();
        out.reason = "the gang fits on no node even when empty: " + g.reason;
        return out;
      }
      if (!freeOne(out)) return noPlan(out);
    }
  }

 private:
  DefragAdvice& noPlan(DefragAdvice& out) {
    const bool partial = !out.freed.empty();
    out.outcome = DefragAdvice::Outcome::kNoPlan;
    out.freed.clear();
    out.moves = 0;
    out.milli_moved = 0;
    out.reason = "no node could be freed for " + std::string(ask_.members > 1 ? "the gang" : "the pod") +
                 " with at most " + std::to_string(in_.max_moves) + " moves of running pods" +
                 (partial ? " (some nodes could, not enough for every member)" : "") + " (" +
                 std::to_string(checks_) + " pod sets tested, " + std::to_string(relocations_) +
                 " relocations tried)";
    return out;
  }

  GpuRequest requestOf(const model::Allocation& a, const model::NodeState& from) const {
    return in_.request_of ? in_.request_of(a, from) : defaultRequestOf(a, from);
  }

  bool movable(const model::Allocation& a) const {
    return a.gang.empty() && a.unknown_gpus == 0 && !a.gpus.empty() && !in_.pinned.contains(a.pod_uid);
  }

  // At least how many moves node i needs before the request could fit there (0: it cannot be
  // freed for it, or needs none): its movable pods, most GPUs first, until the GPUs free or
  // freed cover the request. Topology may need more.
  int movesBound(size_t i) const {
    const model::NodeState& node = overlay_.at(i);
    const GpuRequest& req = ask_.request;
    if (!usable(node) || claimed_.contains(i) || fitOf(findMisfit(node, req)) == Fit::kNever) return 0;
    if (fitsOn(node, req)) return 0;
    std::vector<int> sizes;
    for (const auto& [uid, a] : node.allocations()) {
      if (movable(a)) sizes.push_back(static_cast<int>(a.gpus.size()));
    }
    std::sort(sizes.rbegin(), sizes.rend());
    int have = node.wholeFreeCount(), moves = 0;
    for (int n : sizes) {
      if (have >= req.gpus && moves > 0) break;
      have += n;
      ++moves;
    }
    return have >= req.gpus ? moves : 0;
  }

  // The feasible pod sets of node i, appended to `found` (at most a few, cheapest first).
  void candidatesOf(size_t i, int budget, std::vector<Freeing>& found) {
    const model::NodeState& node = overlay_.at(i);
    if (!usable(node) || claimed_.contains(i)) return;
    const GpuRequest& req = ask_.request;
    if (fitOf(findMisfit(node, req)) == Fit::kNever) return;
    if (fitsOn(node, req)) return;  // a gang member fits here already: planGang counted it
    std::vector<const model::Allocation*> pods;
    uint64_t blocked = 0;  // GPUs some pod that stays holds
    for (const auto& [uid, a] : node.allocations()) {
      if (movable(a)) {
        pods.push_back(&a);
      } else {
        for (int g : a.gpus) blocked |= uint64_t{1} << g;
      }
    }
    if (pods.empty()) return;
    const int could = node.gpuCount() - std::popcount(blocked) - node.unknownHeld();
    if (could < req.gpus) return;
    std::sort(pods.begin(), pods.end(), [](const model::Allocation* a, const model::Allocation* b) {
      return milliOf(*a) != milliOf(*b) ? milliOf(*a) < milliOf(*b) : a->pod_uid < b->pod_uid;
    });
    if (pods.size() > kMaxPodsPerNode) pods.resize(kMaxPodsPerNode);
    model::NodeState scratch = node;
    const int max_size = std::min<int>(budget, static_cast<int>(pods.size()));
    int first_feasible = 0;
    std::vector<size_t> pick;
    for (int k = 1; k <= max_size; ++k) {
      if (first_feasible > 0 && k > first_feasible + 1) break;
      // Combinations of k of the pods, in lexicographic order.
      pick.resize(static_cast<size_t>(k));
      for (size_t j = 0; j < pick.size(); ++j) pick[j] = j;
      for (;;) {
        if (checks_ >= in_.max_checks) return;
        ++checks_;
        for (size_t j : pick) scratch.remove(pods[j]->pod_uid);
        const bool fits = findMisfit(scratch, req) == Misfit::kNone && placeOnNode(scratch, req).has_value();
        for (size_t j : pick) (void)scratch.add(*pods[j]);
        if (fits) {
          Freeing f{i, {}, 0};
          for (size_t j : pick) {
            f.pods.push_back(pods[j]);
            f.milli += milliOf(*pods[j]);
          }
          found.push_back(std::move(f));
          if (first_feasible == 0) first_feasible = k;
        }
        // Next combination.
        int j = k - 1;
        while (j >= 0 && pick[static_cast<size_t>(j)] == pods.size() - static_cast<size_t>(k - j)) --j;
        if (j < 0) break;
        ++pick[static_cast<size_t>(j)];
        for (size_t m = static_cast<size_t>(j) + 1; m < pick.size(); ++m) pick[m] = pick[m - 1] + 1;
      }
    }
  }

  // Moves f's pods off its node onto other nodes, on the overlay; false (overlay unchanged)
  // when one of them fits nowhere else.
  bool relocate(const Freeing& f, DefragFreed& freed) {
    std::vector<const model::Allocation*> order = f.pods;
    std::sort(order.begin(), order.end(), [](const model::Allocation* a, const model::Allocation* b) {
      return milliOf(*a) != milliOf(*b) ? milliOf(*a) > milliOf(*b) : a->pod_uid < b->pod_uid;
    });
    const model::NodeState& source = overlay_.at(f.node);
    // Trial copies of the destinations, so a failed relocation leaves the overlay unchanged.
    std::map<size_t, model::NodeState> trial;
    auto at = [&](size_t j) -> const model::NodeState& {
      auto it = trial.find(j);
      return it != trial.end() ? it->second : overlay_.at(j);
    };
    std::vector<DefragMove> moves;
    std::vector<std::pair<size_t, model::Allocation>> placed;
    for (const model::Allocation* a : order) {
      const GpuRequest req = requestOf(*a, source);
      std::optional<size_t> best;
      NodeScore best_score;
      int64_t best_free = 0;
      for (size_t j = 0; j < overlay_.size(); ++j) {
        if (j == f.node || claimed_.contains(j)) continue;
        const model::NodeState& n = at(j);
        if (!usable(n) || findMisfit(n, req) != Misfit::kNone) continue;
        // The fullest node first: emptier nodes stay free for what waits (a gang's next member).
        const int64_t free = n.freeMilliTotal();
        if (best && free > best_free) continue;
        NodeScore s = in_.policy->score(n, req, in_.context);
        if (static_cast<int>(s.placement.gpus.size()) != req.gpus) continue;
        if (!best || free < best_free || s.value > best_score.value) {
          best = j;
          best_free = free;
          best_score = std::move(s);
        }
      }
      if (!best) return false;
      model::Allocation moved = *a;
      moved.node = at(*best).info().name;
      moved.gpus = best_score.placement.gpus;
      moved.topology_quality = best_score.placement.topology_quality;
      auto it = trial.find(*best);
      if (it == trial.end()) it = trial.emplace(*best, overlay_.at(*best)).first;
      if (!it->second.add(moved).isOk()) return false;  // findMisfit said it fits; never expected
      moves.push_back(
          DefragMove{a->pod_uid, a->pod_key, source.info().name, moved.node, moved.gpus, milliOf(*a)});
      placed.emplace_back(*best, std::move(moved));
    }
    // Carried out on the overlay: the source loses the pods, the destinations take them.
    model::NodeState& src = overlay_.edit(f.node);
    for (const DefragMove& m : moves) src.remove(m.pod_uid);
    for (auto& [j, copy] : trial) overlay_.edit(j) = std::move(copy);
    freed.node = src.info().name;
    freed.moves = std::move(moves);
    freed.free_gpus_after = src.wholeFreeCount();
    int connected = 0;
    for (uint64_t d : src.topology().nvlinkDomains())
      connected = std::max(connected, std::popcount(d & src.fullyFreeMask()));
    freed.connected_after = std::min(connected, freed.free_gpus_after);
    return true;
  }

  // The best freeing of one node, carried out on the overlay and added to `out`.
  bool freeOne(DefragAdvice& out) {
    const int budget = in_.max_moves - out.moves;
    if (budget <= 0) return false;
    // Nodes by the fewest moves that could free enough GPUs there (a lower bound: the largest
    // movable pods first), so the search stops at the first size that works instead of
    // enumerating every node.
    std::vector<std::pair<int, size_t>> order;
    for (size_t i = 0; i < overlay_.size(); ++i) {
      if (const int bound = movesBound(i); bound > 0 && bound <= budget) order.emplace_back(bound, i);
    }
    std::sort(order.begin(), order.end());
    std::vector<Freeing> found;
    size_t best_size = 0, at_best = 0;
    for (const auto& [bound, i] : order) {
      if (checks_ >= in_.max_checks) break;
      if (best_size > 0 && (static_cast<size_t>(bound) > best_size || at_best >= in_.max_relocations)) break;
      const size_t before = found.size();
      candidatesOf(i, budget, found);
      for (size_t k = before; k < found.size(); ++k) {
        const size_t size = found[k].pods.size();
        if (best_size == 0 || size < best_size) {
          best_size = size;
          at_best = 0;
        }
        if (size == best_size) ++at_best;
      }
    }
    std::sort(found.begin(), found.end(), better);
    for (const Freeing& f : found) {
      if (relocations_ >= in_.max_relocations) return false;
      ++relocations_;
      DefragFreed freed;
      if (!relocate(f, freed)) continue;
      claimed_.insert(f.node);
      out.moves += static_cast<int>(freed.moves.size());
      out.milli_moved += f.milli;
      out.freed.push_back(std::move(freed));
      return true;
    }
    return false;
  }

  const DefragAsk& ask_;
  const DefragInput& in_;
  Overlay overlay_;
  std::set<size_t> claimed_;  // nodes freed for the request: no pod moves onto them
  size_t checks_ = 0;
  size_t relocations_ = 0;
};

std::string joinKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

}  // namespace

int DefragAdvice::freedGpus() const {
  int n = 0;
  for (const DefragFreed& f : freed) n += f.free_gpus_after;
  return n;
}

DefragAdvice planDefragAdvice(const DefragAsk& ask, const DefragInput& input) {
  return Planner(ask, input).run();
}

std::string describeDefragAdvice(const DefragAdvice& advice, bool connected) {
  std::string out;
  for (const DefragFreed& f : advice.freed) {
    std::vector<std::string> pods, targets;
    for (const DefragMove& m : f.moves) {
      pods.push_back(m.pod_key.empty() ? m.pod_uid : m.pod_key);
      if (std::find(targets.begin(), targets.end(), m.to) == targets.end()) targets.push_back(m.to);
    }
    const int gpus = connected ? f.connected_after : f.free_gpus_after;
    if (!out.empty()) out += "; ";
    out += std::string("moving ") + (pods.size() == 1 ? "pod " : "pods ") + joinKeys(pods) + " from node " +
           f.node + " to " + (targets.size() == 1 ? "node " : "nodes ") + joinKeys(targets) + " would free " +
           std::to_string(gpus) + (connected ? " connected" : "") + " GPUs on " + f.node;
  }
  return out;
}

}  // namespace troupe::sched
