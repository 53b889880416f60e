#include "adapters/http/connection_table.h"

namespace troupe::http {

void ConnectionTable::unlink(Entry& e) {
  if (e.phase == Phase::kBusy) {
    --busy_;
  } else {
    order_[static_cast<size_t>(e.phase)].erase(e.at);
  }
}

void ConnectionTable::link(Id id, Entry& e) {
  if (e.phase == Phase::kBusy) {
    ++busy_;
  } else {
    std::list<Id>& order = order_[static_cast<size_t>(e.phase)];
    e.at = order.insert(order.end(), id);
  }
}

ConnectionTable::Id ConnectionTable::add(std::weak_ptr<Member> member) {
  std::lock_guard lock(mu_);
  const Id id = ++next_;
  Entry& e = entries_[id];
  e.member = std::move(member);
  link(id, e);
  return id;
}

bool ConnectionTable::enter(Id id, Phase phase) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  unlink(it->second);
  it->second.phase = phase;
  link(id, it->second);
  return true;
}

void ConnectionTable::remove(Id id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  unlink(it->second);
  entries_.erase(it);
}

size_t ConnectionTable::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

size_t ConnectionTable::count(Phase phase) const {
  std::lock_guard lock(mu_);
  return phase == Phase::kBusy ? busy_ : order_[static_cast<size_t>(phase)].size();
}

std::optional<ConnectionTable::Evicted> ConnectionTable::evictOne() {
  std::lock_guard lock(mu_);
  auto take = [this](Id id) {
    auto it = entries_.find(id);
    Evicted out{it->second.member.lock(), it->second.phase};
    unlink(it->second);
    entries_.erase(it);
    return out;
  };
  std::list<Id>& fresh = order_[static_cast<size_t>(Phase::kNew)];
  size_t peeked = 0;
  for (auto it = fresh.begin(); it != fresh.end() && peeked < kPeekNew; ++it, ++peeked) {
    const std::shared_ptr<Member> m = entries_.at(*it).member.lock();
    if (!m || !m->requestWaiting()) return take(*it);
  }
  for (const Phase phase : {Phase::kStarted, Phase::kNew, Phase::kIdle}) {
    const std::list<Id>& order = order_[static_cast<size_t>(phase)];
    if (!order.empty()) return take(order.front());
  }
  return std::nullopt;
}

std::vector<std::shared_ptr<ConnectionTable::Member>> ConnectionTable::members() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Member>> out;
  out.reserve(entries_.size());
  for (const auto& [id, e] : entries_) {
    if (auto m = e.member.lock()) out.push_back(std::move(m));
  }
  return out;
}

}  // namespace troupe::http
