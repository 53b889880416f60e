// Node name -> NodeState for the filter and prioritize hot path. A request names up to
// thousands of candidates; std::unordered_map's node-based buckets cost two dependent cache
// misses per lookup before the node is reached, while this flat open-addressing table (16-byte
// slots holding the name's hash) stays in cache and touches only the node that matches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/model/node.h"

namespace troupe::sched {

// Does not own the nodes: the owner keeps them at stable addresses (std::unordered_map
// elements are) and tells the index about every insertion and removal. A node's key is its
// info().name. Not thread-safe: the owner's lock guards it.
class NodeIndex {
 public:
  const model::NodeState* find(std::string_view name) const;
  // out[i] = find(names[i]) for a whole request at once: the lookups go in passes (hash and
  // touch the slot; touch the node it points to; compare), so that the cache misses of
  // thousands of independent lookups overlap instead of following one another.
  void findAll(std::span<const std::string> names, std::span<const model::NodeState*> out) const;
  // Adds the node, or points an existing entry of the same name at it.
  void insert(const model::NodeState* node);
  // False when no node of that name was indexed.
  bool erase(std::string_view name);
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    const model::NodeState* node = nullptr;  // nullptr: empty
  };
  static uint64_t hashOf(std::string_view name);
  // The slot holding `name`, or the empty slot where the probe for it ends.
  size_t probe(std::string_view name, uint64_t hash) const;
  void grow();

  std::vector<Slot> slots_;  // size 0 or a power of two; at most half full
  size_t size_ = 0;
};

}  // namespace troupe::sched
