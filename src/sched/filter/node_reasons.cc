#include "troupe/sched/filter/node_reasons.h"

#include <optional>
#include <stdexcept>
#include <unordered_map>

namespace troupe::sched {

NodeReasons::ReasonId NodeReasons::intern(std::string_view reason) {
  // The newest reasons are the likeliest to repeat; a bounded look-back keeps adding linear
  // when a caller words every node differently (the copies then cost memory, not time).
  constexpr size_t kLookBack = 8;
  const size_t n = reasons_.size();
  for (size_t k = 0; k < n && k < kLookBack; ++k) {
    if (reasons_[n - 1 - k] == reason) return static_cast<ReasonId>(n - 1 - k);
  }
  reasons_.emplace_back(reason);
  return static_cast<ReasonId>(n);
}

void NodeReasons::addAll(const std::vector<std::string>& nodes, std::string_view reason) {
  const ReasonId id = intern(reason);
  entries_.reserve(entries_.size() + nodes.size());
  for (const std::string& n : nodes) add(n, id);
}

void NodeReasons::clear() {
  entries_.clear();
  reasons_.clear();
}

bool NodeReasons::reword(std::string_view node, std::string_view reason) {
  std::optional<ReasonId> id;
  for (Entry& e : entries_) {
    if (e.node != node) continue;
    if (!id) id = intern(reason);
    e.reason = *id;
  }
  return id.has_value();
}

void NodeReasons::rewordAll(const std::vector<std::pair<std::string, std::string>>& reasons) {
  if (reasons.empty()) return;
  std::unordered_map<std::string_view, std::string_view> by_node;
  by_node.reserve(reasons.size());
  for (const auto& [node, reason] : reasons) by_node[node] = reason;
  for (Entry& e : entries_) {
    if (auto it = by_node.find(e.node); it != by_node.end()) e.reason = intern(it->second);
  }
}

const NodeReasons::Entry* NodeReasons::findEntry(std::string_view node) const {
  // The last entry wins, as the last of repeated JSON keys does.
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->node == node) return &*it;
  }
  return nullptr;
}

const std::string& NodeReasons::at(std::string_view node) const {
  const Entry* e = findEntry(node);
  if (!e) throw std::out_of_range("NodeReasons::at: node " + std::string(node) + " was not rejected");
  return reasons_[e->reason];
}

}  // namespace troupe::sched
