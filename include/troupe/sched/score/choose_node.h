// The placement loop's choice among the nodes that fit a pod, shared by `troupe simulate`
// (sim/replay.cc) and the live narrowing (Scheduler's filter with narrowTo: best), so the two
// cannot drift: the highest value wins; equal values go to the lower tie rank, or with
// TieBreak::kRandom and a random stream to a reservoir draw, as kube-scheduler's selectHost.
// The simulator adds what only it has through the parameters: its random stream (`draw`), its
// seeded node order (`rank`) and its score memo (`value`).
#pragma once

#include <cstddef>
#include <functional>

#include "troupe/sched/policies/policy.h"
#include "troupe/sched/policies/policy_hooks.h"

namespace troupe::sched {

// A number in [0, n) from the caller's random stream.
using Draw = std::function<int(int n)>;

// Index of the chosen one of `count` fitting nodes, or -1 when count is 0. A lone node is taken
// without scoring (kube-scheduler does not call prioritize for it). A policy that draws its node
// (drawsNode) takes draw(count) when there is a stream; otherwise every node is ranked by
// value(i) (called once per node, in order) and, on a tie only, rank(i) (lower wins).
// Exact comparisons: the policies' whole-number steps are meant to tie.
template <class ValueFn, class RankFn>
int chooseNode(size_t count, const Policy& policy, TieBreak ties, ValueFn&& value, RankFn&& rank,
               const Draw& draw = {}) {
  if (count == 0) return -1;
  if (count == 1) return 0;
  if (draw && hooksOf(policy).drawsNode()) return draw(static_cast<int>(count));
  int best = -1;
  double best_value = 0;
  decltype(rank(size_t{0})) best_rank{};
  bool ranked = false;  // best_rank is computed on the first tie
  int tied = 0;
  for (size_t i = 0; i < count; ++i) {
    const double v = value(i);
    bool take = false;
    if (best < 0 || v > best_value) {
      take = true;
      tied = 1;
      ranked = false;
    } else if (v == best_value) {
      if (ties == TieBreak::kRandom && draw) {
        take = draw(++tied) == 0;  // reservoir sampling over the tied nodes
        if (take) ranked = false;
      } else {
        if (!ranked) best_rank = rank(static_cast<size_t>(best));
        const auto r = rank(i);
        take = r < best_rank;
        best_rank = take ? r : best_rank;
        ranked = true;
      }
    }
    if (take) {
      best = static_cast<int>(i);
      best_value = v;
    }
  }
  return best;
}

}  // namespace troupe::sched
