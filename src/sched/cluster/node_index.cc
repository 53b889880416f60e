#include "troupe/sched/cluster/node_index.h"

#include <algorithm>
#include <functional>

namespace troupe::sched {

uint64_t NodeIndex::hashOf(std::string_view name) { return std::hash<std::string_view>{}(name); }

size_t NodeIndex::probe(std::string_view name, uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (!s.node || (s.hash == hash && s.node->info().name == name)) return i;
  }
}

const model::NodeState* NodeIndex::find(std::string_view name) const {
  if (size_ == 0) return nullptr;
  return slots_[probe(name, hashOf(name))].node;
}

void NodeIndex::findAll(std::span<const std::string> names, std::span<const model::NodeState*> out) const {
  if (size_ == 0) {
    std::fill(out.begin(), out.end(), nullptr);
    return;
  }
  const size_t mask = slots_.size() - 1;
  std::vector<uint64_t> hashes(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    hashes[i] = hashOf(names[i]);
    __builtin_prefetch(&slots_[hashes[i] & mask]);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    // The home slot nearly always holds the node (the table is at most half full). The
    // compare reads the name at its start, filter then reads the product, GPU count,
    // capacities, free mask and usage in the next few cache lines.
    if (const model::NodeState* node = slots_[hashes[i] & mask].node) {
      const char* bytes = reinterpret_cast<const char*>(node);
      for (size_t line = 0; line < 5; ++line) __builtin_prefetch(bytes + 64 * line);
    }
  }
  for (size_t i = 0; i < names.size(); ++i) out[i] = slots_[probe(names[i], hashes[i])].node;
}

void NodeIndex::insert(const model::NodeState* node) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const uint64_t hash = hashOf(node->info().name);
  Slot& s = slots_[probe(node->info().name, hash)];
  if (!s.node) ++size_;
  s = {hash, node};
}

bool NodeIndex::erase(std::string_view name) {
  if (size_ == 0) return false;
  const size_t mask = slots_.size() - 1;
  size_t hole = probe(name, hashOf(name));
  if (!slots_[hole].node) return false;
  // Backward-shift deletion: move later entries of the probe run into the hole when their
  // home slot is not after it, so every entry stays reachable without tombstones.
  for (size_t next = (hole + 1) & mask; slots_[next].node; next = (next + 1) & mask) {
    const size_t home = slots_[next].hash & mask;
    const bool movable = hole <= next ? (home <= hole || home > next) : (home <= hole && home > next);
    if (movable) {
      slots_[hole] = slots_[next];
      hole = next;
    }
  }
  slots_[hole] = Slot{};
  --size_;
  return true;
}

void NodeIndex::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (!s.node) continue;
    size_t i = s.hash & mask;
    while (slots_[i].node) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

}  // namespace troupe::sched
