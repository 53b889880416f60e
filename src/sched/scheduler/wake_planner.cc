#include "troupe/sched/scheduler/wake_planner.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

namespace troupe::sched {

std::vector<WakeCandidate> WakePlanner::plan(std::vector<WakeCandidate> refused, const Fits& fits,
                                             Clock::time_point now, int64_t free_milli) {
  {
    // A pod no longer refused (bound, deleted, or passed a filter since) is remembered for the
    // longest backoff: one that bounces between passing and being refused again (a gang member
    // whose bind timed out) keeps doubling its backoff instead of starting over.
    std::unordered_set<std::string> live;
    live.reserve(refused.size());
    for (const WakeCandidate& c : refused) live.insert(c.uid);
    std::erase_if(woken_, [&](const auto& w) {
      return !live.count(w.first) && now >= w.second.at + options_.max_backoff;
    });
  }
  // kube-scheduler's own order: higher priority first, then the longest waiting.
  std::sort(refused.begin(), refused.end(), [](const WakeCandidate& a, const WakeCandidate& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.seq < b.seq;
  });
  auto resting = [&](const WakeCandidate& c) {
    auto it = woken_.find(c.uid);
    return it != woken_.end() && now < it->second.at + it->second.backoff;
  };
  std::unordered_map<std::string, int64_t> queue_taken;  // by the pods chosen so far
  std::unordered_map<std::string, bool> gang_fits;       // asked once per gang
  // A pod woken that kube-scheduler has not filtered again yet (its record is the same) is on
  // its way to the room it was woken for: that room is not offered to another pod meanwhile.
  for (const WakeCandidate& c : refused) {
    auto it = woken_.find(c.uid);
    if (it != woken_.end() && it->second.seq == c.seq && resting(c)) {
      queue_taken[c.queue] += c.milli;
      free_milli -= c.milli;
    }
  }
  std::vector<WakeCandidate> out;
  for (WakeCandidate& c : refused) {
    if (out.size() >= options_.max_per_round) break;
    if (resting(c)) continue;
    if (c.milli > free_milli) continue;  // a smaller pod behind it may still fit
    int64_t& taken = queue_taken[c.queue];
    bool ok = false;
    if (c.gang.empty()) {
      ok = fits(c, taken);
    } else {
      auto [it, fresh] = gang_fits.try_emplace(c.gang, false);
      if (fresh) it->second = fits(c, taken);
      ok = it->second;
    }
    if (!ok) continue;
    taken += c.milli;
    free_milli -= c.milli;
    auto [w, fresh] = woken_.try_emplace(c.uid, Woken{now, options_.first_backoff, c.seq});
    if (!fresh) {
      w->second.at = now;
      w->second.seq = c.seq;
      w->second.backoff = std::min<Clock::duration>(w->second.backoff * 2, options_.max_backoff);
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace troupe::sched
