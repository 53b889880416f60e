#include "troupe/sched/score/score_memo.h"

#include <algorithm>

namespace troupe::sched {

uint32_t ScoreMemo::shapeLocked(const GpuRequest& req, const std::shared_ptr<const RequestMix>& mix) {
  if (mix != mix_ || shapes_.size() >= kShapes) {
    // Entries of older generations never match again; no need to visit them.
    mix_ = mix;
    shapes_.clear();
    ++generation_;
  }
  for (size_t s = 0; s < shapes_.size(); ++s) {
    if (shapes_[s] == req) return static_cast<uint32_t>(s);
  }
  shapes_.push_back(req);
  return static_cast<uint32_t>(shapes_.size() - 1);
}

void ScoreMemo::values(const std::vector<const model::NodeState*>& nodes, const GpuRequest& req,
                       const std::shared_ptr<const RequestMix>& mix, const Score& score,
                       std::span<double> values) {
  std::vector<size_t> missed;
  uint32_t shape = 0, generation = 0;
  {
    std::lock_guard lock(mu_);
    shape = shapeLocked(req, mix);
    generation = generation_;
    // The entries of thousands of nodes do not stay in cache between calls: ask for the
    // entries a few nodes ahead while this one is compared.
    constexpr size_t kAhead = 8;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (i + kAhead < nodes.size()) {
        const uint32_t ahead = nodes[i + kAhead]->ordinal();
        if (ahead < nodes_.size()) __builtin_prefetch(&nodes_[ahead]);
      }
      const uint32_t ordinal = nodes[i]->ordinal();
      if (ordinal >= nodes_.size()) nodes_.resize(std::max<size_t>(ordinal + 1, nodes_.size() * 2));
      const NodeEntries& entries = nodes_[ordinal];
      const Entry* hit = nullptr;
      for (const Entry& e : entries.ways) {
        if (e.generation == generation && e.shape == shape && e.changes == nodes[i]->changes()) hit = &e;
      }
      if (hit) {
        values[i] = hit->value;
      } else {
        missed.push_back(i);
      }
    }
    stats_.hits += nodes.size() - missed.size();
    stats_.misses += missed.size();
  }
  if (missed.empty()) return;
  for (size_t i : missed) values[i] = score(*nodes[i]);
  std::lock_guard lock(mu_);
  if (generation != generation_) return;  // the mix changed meanwhile: these values are old
  for (size_t i : missed) {
    NodeEntries& entries = nodes_[nodes[i]->ordinal()];
    // The node's entry for this shape if it has one (now stale), else the next way in turn.
    auto same = [&](const Entry& e) { return e.generation == generation && e.shape == shape; };
    auto way = std::find_if(entries.ways.begin(), entries.ways.end(), same);
    if (way == entries.ways.end()) {
      way = entries.ways.begin() + entries.next;
      entries.next = static_cast<uint32_t>((entries.next + 1) % kWays);
    }
    *way = Entry{nodes[i]->changes(), generation, shape, values[i]};
  }
}

void ScoreMemo::forget(uint32_t ordinal) {
  std::lock_guard lock(mu_);
  if (ordinal < nodes_.size()) nodes_[ordinal] = NodeEntries{};
}

ScoreMemo::Stats ScoreMemo::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace troupe::sched
