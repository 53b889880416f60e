#include "troupe/sched/cluster/node_ordinal_set.h"

#include <algorithm>

namespace troupe::sched {

NodeOrdinalSet::NodeOrdinalSet(std::vector<uint32_t> ordinals) {
  std::sort(ordinals.begin(), ordinals.end());
  ordinals.erase(std::unique(ordinals.begin(), ordinals.end()), ordinals.end());
  size_ = ordinals.size();
  if (ordinals.empty()) return;
  const size_t words = static_cast<size_t>(ordinals.back()) / 64 + 1;
  if (words * sizeof(uint64_t) < ordinals.size() * sizeof(uint32_t)) {
    bits_.assign(words, 0);
    for (uint32_t o : ordinals) bits_[o / 64] |= uint64_t{1} << (o % 64);
  } else {
    ordinals.shrink_to_fit();
    list_ = std::move(ordinals);
  }
}

bool NodeOrdinalSet::contains(uint32_t ordinal) const {
  if (!bits_.empty()) {
    const size_t word = ordinal / 64;
    return word < bits_.size() && (bits_[word] >> (ordinal % 64) & 1) != 0;
  }
  return std::binary_search(list_.begin(), list_.end(), ordinal);
}

}  // namespace troupe::sched
