// One simulation run: the pods of a RunPlan tried once each, in order, through the live core's
// checkNode filter and the policy's node score. A pod that fits nowhere is dropped (no retry,
// no preemption); pods never leave. After every pod the run records the GPU milli that has
// arrived (failed pods included) and the milli allocated: the allocation curve.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/sched/policies/policy.h"
#include "troupe/sim/cluster.h"
#include "troupe/sim/workload.h"

namespace troupe::sim {

struct CurvePoint {
  int64_t arrived_milli = 0;
  int64_t used_milli = 0;
};

// What the defragmentation advisor (defrag.h) found at the report point (100% arrived).
struct DefragOutcome {
  double free_gpus = 0;                  // unallocated GPUs; moves do not change it
  double fragmented_before = 0;          // fragmented GPUs against the trace's typical pods
  std::vector<int> k;                    // the move budgets asked for
  std::vector<int> moves;                // per budget: moves made (fewer when none helped)
  std::vector<double> fragmented_after;  // per budget
  double seconds = 0;                    // wall time of the advisor
};

// Requests by size, for counting jobs and not only GPUs: CPU-only, a share of one GPU, 1 GPU,
// 2-3, 4-7, and 8 or more GPUs (a whole node of the common 8-GPU machines).
enum class SizeClass { kCpu, kShare, kOne, kTwo, kFour, kEight };
inline constexpr size_t kSizeClasses = 6;
SizeClass sizeClassOf(const sched::GpuRequest& req);
// "cpu", "share", "1", "2", "4", "8+".
std::string_view sizeClassName(size_t cls);

// The pods of one size class that arrived up to 100% of capacity.
struct SizeTally {
  int pods = 0;
  int failed = 0;
  int64_t milli = 0;         // GPU milli they asked for
  int64_t placed_milli = 0;  // ... of it placed
};

struct RunResult {
  std::string policy;  // the policy's name
  int64_t seed = 0;
  int64_t capacity_gpus = 0;
  std::vector<CurvePoint> curve;  // one point per pod tried
  std::vector<int> node_of;       // per pod tried: the node index it went to, -1 if dropped
  int pods = 0;
  int clones = 0;
  int placed = 0;
  int multi_gpu_placed = 0;             // pods of 2+ GPUs placed
  int multi_gpu_best = 0;               // ... of them on a best-possible GPU set of their node
  double seconds = 0;                   // wall time of the replay
  std::optional<DefragOutcome> defrag;  // when ReplayInput::defrag_moves is not empty
  // The pods that arrived up to 100% of capacity packed with hindsight (packing_floor.h): the
  // idle milli-GPU their sizes alone leave. Depends on the seed only, not on the policy;
  // nullopt when the arrived requests never reach 100%.
  std::optional<int64_t> floor_idle_milli;
  // Per SizeClass: the pods tried while the arrived requests were within 100% of capacity.
  std::array<SizeTally, kSizeClasses> by_size{};
};

struct ReplayInput {
  const Cluster* cluster = nullptr;
  const std::vector<TracePod>* sorted_pods = nullptr;  // by name (in_order: in replay order)
  int64_t seed = 42;
  double tune_ratio = kDefaultTuneRatio;
  sched::PolicyConfig policy;
  // What a fresh `troupe serve --narrow-to best` does with these pods created one at a time:
  // no shuffle and no clones (planInOrder), ties by the live node order, and every policy
  // measures fragmentation against the live window of requests, started empty.
  bool in_order = false;
  // Move budgets for the defragmentation advisor, run on a copy of the cluster when the
  // arrived requests first reach 100% of capacity (or at the end); empty = not run.
  std::vector<int> defrag_moves;
};

RunResult replay(const ReplayInput& input);

}  // namespace troupe::sim
