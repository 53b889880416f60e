#include "troupe/sched/queue/reclaim_book.h"

#include <algorithm>

namespace troupe::sched {
namespace {

bool samePlan(const ReclaimPlan& a, const ReclaimPlan& b) {
  if (a.queue != b.queue || a.for_key != b.for_key || a.victims.size() != b.victims.size()) return false;
  for (size_t i = 0; i < a.victims.size(); ++i) {
    if (a.victims[i].uid != b.victims[i].uid) return false;
  }
  return true;
}

}  // namespace

bool ReclaimBook::start(const ReclaimPlan& plan, TimePoint now, TimePoint deadline) {
  std::lock_guard lock(mu_);
  if (plan_ && now >= deadline_) plan_.reset();
  if (plan_) return false;
  if (plan.victims.empty()) return false;
  plan_ = plan;
  deadline_ = deadline;
  waiting_for_.clear();
  unbound_.clear();
  nodes_.clear();
  for (const ReclaimVictim& v : plan.victims) {
    waiting_for_.insert(v.uid);
    nodes_.insert(v.node);
  }
  for (const ReclaimServed& s : plan.served) unbound_.insert(s.uids.begin(), s.uids.end());
  return true;
}

bool ReclaimBook::inFlight(TimePoint now) {
  std::lock_guard lock(mu_);
  if (plan_ && now >= deadline_) plan_.reset();
  return plan_.has_value();
}

std::optional<ReclaimPlan> ReclaimBook::current(TimePoint now) {
  std::lock_guard lock(mu_);
  if (plan_ && now >= deadline_) plan_.reset();
  return plan_;
}

void ReclaimBook::settledLocked(const std::string& uid) {
  if (!plan_ || (waiting_for_.erase(uid) == 0 && unbound_.erase(uid) == 0)) return;
  if (waiting_for_.empty() && unbound_.empty()) plan_.reset();
}

void ReclaimBook::podGone(const std::string& uid) {
  std::lock_guard lock(mu_);
  settledLocked(uid);
}

void ReclaimBook::podBound(const std::string& uid) {
  std::lock_guard lock(mu_);
  if (plan_ && unbound_.contains(uid)) settledLocked(uid);
}

void ReclaimBook::queueHolds(const std::string& queue, int64_t milli) {
  std::lock_guard lock(mu_);
  if (!plan_ || queue != plan_->queue || unbound_.empty()) return;
  int64_t owed = 0;
  for (const ReclaimServed& s : plan_->served) owed += s.milli;
  if (milli < plan_->held_milli + owed) return;
  unbound_.clear();
  if (waiting_for_.empty()) plan_.reset();
}

std::set<std::string> ReclaimBook::waitingPods() const {
  std::lock_guard lock(mu_);
  return plan_ ? unbound_ : std::set<std::string>{};
}

bool ReclaimBook::finish(const ReclaimPlan& plan) {
  std::lock_guard lock(mu_);
  if (!plan_ || !samePlan(*plan_, plan)) return false;
  plan_.reset();
  return true;
}

void ReclaimBook::spare(const ReclaimPlan& plan, TimePoint until) {
  std::lock_guard lock(mu_);
  for (const ReclaimVictim& v : plan.victims) spared_[v.uid] = std::max(spared_[v.uid], until);
}

std::set<std::string> ReclaimBook::spared(TimePoint now) {
  std::lock_guard lock(mu_);
  std::erase_if(spared_, [&](const auto& kv) { return kv.second <= now; });
  std::set<std::string> out;
  for (const auto& [uid, until] : spared_) out.insert(uid);
  return out;
}

bool ReclaimBook::holding(TimePoint now) const {
  std::lock_guard lock(mu_);
  return activeLocked(now);
}

std::optional<std::string> ReclaimBook::refusal(const std::string& queue, const std::string& node,
                                                TimePoint now) const {
  std::lock_guard lock(mu_);
  if (!activeLocked(now) || queue == plan_->queue || !nodes_.contains(node)) return std::nullopt;
  return "troupe: node " + node + " is being freed for queue " + plan_->queue + " (reclaim for " +
         plan_->for_key + "); pods of queue " + queue + " may use it once the reclaim ends";
}

}  // namespace troupe::sched
