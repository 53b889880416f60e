#include "troupe/sched/filter/filter_stage_gang.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "troupe/sched/filter/filter_stage_hold.h"
#include "troupe/sched/filter/filter_stage_nodes.h"

namespace troupe::sched {

bool gangStage(FilterCycle& cycle, const FilterParts& parts) {
  if (!cycle.in_gang) return true;
  const GangSpec& spec = *cycle.gang;
  std::vector<std::string> candidates;
  FilterResult held_back;
  const std::vector<std::string>* offered = &cycle.node_names;
  if (!cycle.queue.empty()) {
    const GangBook::Progress progress = parts.gangs.progress(spec.key);
    if (!progress.planned && !progress.admitted) {
      // Not planned yet: the queue must admit the whole gang (what its bound members hold is
      // not counted twice), or its plan would hold GPUs the queue may not take.
      held_back.passed = cycle.node_names;
      holdBack(parts, cycle.queue, spec.min_member * cycle.request.totalMilli(), spec.key, held_back,
               nullptr);
      holdForReclaim(parts, cycle.queue, held_back, nullptr);
      candidates = std::move(held_back.passed);
      held_back.passed.clear();
      offered = &candidates;
    }
  }
  std::optional<FilterResult> answer;
  if (offered->empty()) {
    answer = FilterResult{};
  } else {
    answer = parts.gangs.filter(cycle.pod, cycle.request, spec, *offered, cycle.completions);
    // nullopt: an admitted gang's member, filtered like a pod on its own.
    if (!answer) answer = filterSingle(parts.cluster, parts.gangs, cycle.request, *offered, spec.key);
  }
  for (const auto& [node, reason] : held_back.failed) answer->failed.add(node, reason);
  for (const auto& [category, n] : held_back.categories) answer->categories[category] += n;
  cycle.out = std::move(*answer);
  return false;
}

}  // namespace troupe::sched
