// Reclaim: giving a queue back its guaranteed GPUs. When a queue holds less than it is
// guaranteed and has a pending pod (or gang) that fits nowhere, the planner picks pods to evict
// from queues above their fair share:
//   - only pods of preemptible queues, running at least the minimum runtime;
//   - a victim's queue keeps at least its own guaranteed share after the eviction;
//   - a gang is a victim whole (all its bound members, on every node) or not at all;
//   - the cheapest set first: fewest GPUs, then lowest priority, then the most recently started;
//   - only as much as lets the waiting pod (every member of a waiting gang) fit, checked on a
//     copy of the nodes with the victims removed, so the evictions make room where it is needed.
// Pure: the adapter performs the evictions (Eviction API, so PodDisruptionBudgets are honoured)
// and the Scheduler keeps the plan in flight until the victims are gone or its deadline passes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "troupe/sched/queue_book.h"

namespace troupe::sched {

struct ReclaimVictim {
  std::string uid;
  std::string key;  // namespace/name
  std::string queue;
  std::string gang;  // "" = on its own
  std::string node;
  int64_t milli = 0;
  int64_t priority = 0;
};

struct ReclaimPlan {
  std::string queue;                   // the queue that gets its guarantee back
  std::string for_key;                 // the pending pod (namespace/name) or gang key the room is for
  std::vector<ReclaimVictim> victims;  // whole gangs only
  int64_t freed_milli = 0;
  // Said on each victim's eviction Event and on the waiting pod: who is evicted for whom, and why.
  std::string reason;
};

}  // namespace troupe::sched
