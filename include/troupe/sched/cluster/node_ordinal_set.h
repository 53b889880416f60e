// A set of node ordinals (NodeState::ordinal), for what one filter call passed: the nodes a
// pod may then be bound to. Small sets are a sorted list, large ones a bitset, whichever is
// smaller, so 100,000 remembered pods cost at most a bit per node each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe::sched {

class NodeOrdinalSet {
 public:
  NodeOrdinalSet() = default;
  explicit NodeOrdinalSet(std::vector<uint32_t> ordinals);

  bool contains(uint32_t ordinal) const;
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Heap bytes held (for tests of the representation).
  size_t bytes() const { return list_.capacity() * sizeof(uint32_t) + bits_.capacity() * sizeof(uint64_t); }

 private:
  std::vector<uint32_t> list_;  // sorted, unique; used when bits_ is empty
  std::vector<uint64_t> bits_;  // bit i of word i/64: ordinal i is in the set
  size_t size_ = 0;
};

}  // namespace troupe::sched
