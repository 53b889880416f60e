// One run's workload, drawn the FGD artifact's way from one random stream seeded with the run's
// seed (Go's math/rand, so seed 42 gives the artifact's seed-42 run):
//   1. one throw-away draw (the artifact logs rand.Int() after seeding);
//   2. the pods sorted by name, then shuffled;
//   3. tuned to `tune_ratio` of the GPU capacity: pods drawn at random from the sorted list are
//      cloned and appended at the end until the next one's per-GPU milli would pass the target
//      (a trace already above the target is replayed whole; the artifact would drop pods);
//   4. ten draws skipped (client-go informers take them in the artifact);
//   5. a permutation of the nodes (sorted by name): node i gets rank perm[i], the tie-break.
// The stream then goes on serving the random policy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/sim/go_random.h"
#include "troupe/sim/trace.h"

namespace troupe::sim {

struct RunPlan {
  std::vector<int> order;      // indices into the name-sorted pods, clones included
  std::vector<int> node_rank;  // per node (sorted by name); lower wins ties
  GoRandom random;             // the stream, positioned after the plan's draws
  int clones = 0;
};

inline constexpr double kDefaultTuneRatio = 1.3;

// `sorted_pods` must be sorted by name.
RunPlan planRun(const std::vector<TracePod>& sorted_pods, int node_count, int64_t capacity_milli,
                int64_t seed, double tune_ratio = kDefaultTuneRatio);

// The live replay's plan: every pod once, in the given order, no clones; ties go to the live
// extender's node order (nodeTieRank of each name, `node_names` sorted by name). The stream,
// seeded, serves only the random policy.
RunPlan planInOrder(int pod_count, const std::vector<std::string>& node_names, int64_t seed);

}  // namespace troupe::sim
