// Node name -> why filter rejected it, as FailedNodes / FailedAndUnresolvableNodes carry it.
//
// A filter answer at thousands of nodes rejects most of them for a handful of distinct
// reasons. A std::map<string, string> paid a tree node, a copy of the reason and a string
// compare per level for each rejection (a quarter of a 5,000-node filter); here the names sit
// in one vector in rejection order and each distinct reason is stored once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::sched {

class NodeReasons {
 public:
  using ReasonId = uint32_t;
  using value_type = std::pair<const std::string&, const std::string&>;

  // Keeps `reason` once and returns its id; an equal reason kept recently is reused.
  ReasonId intern(std::string_view reason);
  // Records that `node` was rejected. A node is expected once per answer (kube-scheduler
  // sends each candidate once); adding it again makes a second entry, as JSON would carry it.
  void add(std::string node, ReasonId reason) { entries_.push_back({std::move(node), reason}); }
  void add(std::string node, std::string_view reason) { add(std::move(node), intern(reason)); }
  // Rejects every one of `nodes` for the same reason.
  void addAll(const std::vector<std::string>& nodes, std::string_view reason);

  // Gives an already rejected node another reason (every entry of it); false when it has none.
  bool reword(std::string_view node, std::string_view reason);
  // reword() for many nodes in one pass over the entries: (node, reason) pairs.
  void rewordAll(const std::vector<std::pair<std::string, std::string>>& reasons);

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear();
  void reserve(size_t nodes) { entries_.reserve(nodes); }
  // Lookups scan the entries: for tests and single-node questions, not for hot paths.
  bool contains(std::string_view node) const { return findEntry(node) != nullptr; }
  // The node's reason; throws std::out_of_range naming the node when it was not rejected.
  const std::string& at(std::string_view node) const;
  const std::vector<std::string>& reasons() const { return reasons_; }

  struct Entry {
    std::string node;
    ReasonId reason;
  };
  const std::vector<Entry>& entries() const { return entries_; }

  // Iterates (node, reason) pairs in rejection order, like a map's value_type.
  class const_iterator {
   public:
    const_iterator(const NodeReasons* owner, size_t i) : owner_(owner), i_(i) {}
    value_type operator*() const {
      const Entry& e = owner_->entries_[i_];
      return {e.node, owner_->reasons_[e.reason]};
    }
    struct Arrow {
      value_type pair;
      const value_type* operator->() const { return &pair; }
    };
    Arrow operator->() const { return {**this}; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }

   private:
    const NodeReasons* owner_;
    size_t i_;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, entries_.size()}; }

 private:
  const Entry* findEntry(std::string_view node) const;

  std::vector<Entry> entries_;
  std::vector<std::string> reasons_;
};

}  // namespace troupe::sched
