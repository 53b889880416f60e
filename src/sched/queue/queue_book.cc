#include "troupe/sched/queue/queue_book.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <tuple>

#include "troupe/common/strings.h"
#include "troupe/sched/cluster/gpu_amount.h"

namespace troupe::sched {
namespace {

int64_t at(const ProductMilli& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

bool accepts(const QueuedPod& pod, const std::string& product) {
  if (pod.models.empty()) return true;
  return std::any_of(pod.models.begin(), pod.models.end(),
                     [&](const std::string& m) { return equalsIgnoreCase(m, product); });
}

// A pending pod's ask spread over the products it accepts, in proportion to their capacity
// (floors, the rest to the largest product). Nothing when no product it accepts has capacity.
ProductMilli spreadAsk(const QueuedPod& pod, const ProductMilli& capacity) {
  ProductMilli out;
  int64_t total = 0;
  std::string largest;
  for (const auto& [product, milli] : capacity) {
    if (milli <= 0 || !accepts(pod, product)) continue;
    total += milli;
    if (largest.empty() || milli > capacity.at(largest)) largest = product;
  }
  if (total == 0) return out;
  int64_t given = 0;
  for (const auto& [product, milli] : capacity) {
    if (milli <= 0 || !accepts(pod, product)) continue;
    const auto part = static_cast<int64_t>(static_cast<long double>(pod.milli) * milli / total);
    if (part > 0) out[product] = part;
    given += part;
  }
  if (given < pod.milli) out[largest] += pod.milli - given;
  return out;
}

std::string productName(const std::string& product) { return product.empty() ? "unlabelled" : product; }

std::string gpus(int64_t milli) { return gpusText(milli) + (milli == 1000 ? " GPU" : " GPUs"); }

std::string productGpus(int64_t milli, const std::string& product) {
  return gpusText(milli) + " " + productName(product) + (milli == 1000 ? " GPU" : " GPUs");
}

std::string numberText(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

void QueueBook::setQueues(QueueTree tree) {
  std::lock_guard lock(mu_);
  tree_ = std::move(tree);
  enabled_.store(!tree_.empty(), std::memory_order_release);
  rebuildHeldLocked();
  std::erase_if(pending_fits_, [&](const auto& kv) { return !tree_.find(kv.first); });
  std::erase_if(fitting_ask_, [&](const auto& kv) { return !tree_.find(kv.first); });
  recomputeFairLocked();
  recomputeWaitingLocked();
}

void QueueBook::setNamespaceDefault(const std::string& ns, const std::string& queue) {
  std::lock_guard lock(mu_);
  if (queue.empty()) {
    namespace_defaults_.erase(ns);
  } else {
    namespace_defaults_[ns] = queue;
  }
}

bool QueueBook::enabled() const { return enabled_.load(std::memory_order_acquire); }

Result<QueueMembership> QueueBook::membership(const PodFacts& pod) const {
  std::lock_guard lock(mu_);
  auto it = namespace_defaults_.find(pod.ns);
  return queueOf(pod, tree_, it == namespace_defaults_.end() ? "" : it->second);
}

void QueueBook::accountLocked(const QueuedPod& pod, int sign) {
  if (!pod.bound()) return;
  const int64_t delta = sign * pod.milli;
  for (const std::string& q : tree_.lineage(pod.queue)) {
    int64_t& p = held_[q][pod.product];
    p += delta;
    if (p == 0) held_[q].erase(pod.product);
    held_total_[q] += delta;
  }
  if (!pod.gang.empty()) {
    int64_t& g = gang_held_[pod.gang];
    g += delta;
    if (g == 0) gang_held_.erase(pod.gang);
  }
}

void QueueBook::rebuildHeldLocked() {
  held_.clear();
  held_total_.clear();
  gang_held_.clear();
  for (const auto& [uid, pod] : pods_) accountLocked(pod, 1);
}

void QueueBook::upsertPod(QueuedPod pod) {
  std::lock_guard lock(mu_);
  if (auto it = pods_.find(pod.uid); it != pods_.end()) {
    accountLocked(it->second, -1);
    pods_.erase(it);
  }
  if (pod.milli <= 0) return;
  accountLocked(pod, 1);
  const std::string uid = pod.uid;
  pods_.emplace(uid, std::move(pod));
}

void QueueBook::removePod(const std::string& uid) {
  std::lock_guard lock(mu_);
  if (auto it = pods_.find(uid); it != pods_.end()) {
    accountLocked(it->second, -1);
    pods_.erase(it);
  }
}

std::optional<QueuedPod> QueueBook::pod(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return std::nullopt;
  return it->second;
}

std::vector<QueuedPod> QueueBook::pods() const {
  std::lock_guard lock(mu_);
  std::vector<QueuedPod> out;
  out.reserve(pods_.size());
  for (const auto& [uid, pod] : pods_) out.push_back(pod);
  std::sort(out.begin(), out.end(), [](const QueuedPod& a, const QueuedPod& b) { return a.uid < b.uid; });
  return out;
}

std::map<std::string, QueueDemand> QueueBook::demandLocked() const {
  std::map<std::string, QueueDemand> out;
  for (const auto& [uid, pod] : pods_) {
    if (!tree_.find(pod.queue)) continue;
    QueueDemand& d = out[pod.queue];
    if (pod.bound()) {
      d.allocated[pod.product] += pod.milli;
    } else {
      for (const auto& [product, milli] : spreadAsk(pod, capacity_)) d.pending[product] += milli;
    }
  }
  return out;
}

void QueueBook::recomputeFairLocked() {
  fair_.clear();
  if (tree_.empty() || capacity_.empty()) return;
  fair_ = computeFairShares(tree_, capacity_, demandLocked());
}

int64_t QueueBook::heldLocked(const std::string& queue, const std::string& product) const {
  auto it = held_.find(queue);
  return it == held_.end() ? 0 : at(it->second, product);
}

int64_t QueueBook::heldTotalLocked(const std::string& queue) const {
  auto it = held_total_.find(queue);
  return it == held_total_.end() ? 0 : it->second;
}

int64_t QueueBook::shareLocked(const std::string& queue, const std::string& product) const {
  auto it = fair_.find(queue);
  return it == fair_.end() ? 0 : at(it->second.share, product);
}

int64_t QueueBook::shareTotalLocked(const std::string& queue) const {
  auto it = fair_.find(queue);
  return it == fair_.end() ? 0 : it->second.total_milli;
}

void QueueBook::recomputeWaitingLocked() {
  waiting_.clear();
  waiting_below_.clear();
  if (fair_.empty()) return;
  // A queue waits for a product when its first pending pod that fits now accepts that product
  // and would be admitted on it: with the pod, the queue and every ancestor stay within their
  // fair share (all products together) and their limits. A queue whose next pod would itself go
  // beyond its share holds nobody back: two queues each waiting for the other would leave GPUs
  // idle for ever.
  for (const auto& [queue, fits] : pending_fits_) {
    auto ask = fitting_ask_.find(queue);
    if (!fits || ask == fitting_ask_.end() || !tree_.find(queue)) continue;
    const QueuedPod& pod = ask->second;
    const std::vector<std::string> line = tree_.lineage(queue);
    for (const auto& [product, capacity] : capacity_) {
      if (!accepts(pod, product) || limitLocked(queue, pod.milli, product, "")) continue;
      const bool within = std::all_of(line.begin(), line.end(), [&](const std::string& q) {
        return heldTotalLocked(q) + pod.milli <= shareTotalLocked(q);
      });
      if (!within) continue;
      waiting_[product].push_back(queue);
      for (const std::string& up : line) ++waiting_below_[product][up];
    }
  }
}

void QueueBook::refresh(const ProductMilli& capacity, const std::function<bool(const QueuedPod&)>& fits) {
  std::map<std::string, std::vector<QueuedPod>> pending;  // by queue
  {
    std::lock_guard lock(mu_);
    capacity_.clear();
    for (const auto& [product, milli] : capacity) {
      if (milli > 0) capacity_[product] = milli;
    }
    recomputeFairLocked();
    for (const auto& [uid, pod] : pods_) {
      if (!pod.bound() && tree_.find(pod.queue)) pending[pod.queue].push_back(pod);
    }
  }
  // Outside the lock: `fits` looks at the cluster model. Per queue, the first pod in its order
  // (priority, then arrival) that fits ends the search; a shape already found not to fit is
  // not asked again.
  std::map<std::string, bool> found;
  std::map<std::string, QueuedPod> asks;
  for (auto& [queue, list] : pending) {
    std::sort(list.begin(), list.end(), [](const QueuedPod& a, const QueuedPod& b) {
      return std::tie(b.priority, a.since, a.uid) < std::tie(a.priority, b.since, b.uid);
    });
    std::set<std::pair<int64_t, std::vector<std::string>>> tried;
    bool any = false;
    for (const QueuedPod& p : list) {
      if (!tried.insert({p.milli, p.models}).second) continue;
      if (fits(p)) {
        any = true;
        asks[queue] = p;
        break;
      }
    }
    found[queue] = any;
  }
  std::lock_guard lock(mu_);
  pending_fits_ = std::move(found);
  fitting_ask_ = std::move(asks);
  recomputeWaitingLocked();
}

int64_t QueueBook::askLocked(int64_t milli, const std::string& gang) const {
  // A gang asks for all its members; what its bound members hold is counted already.
  if (gang.empty()) return milli;
  auto it = gang_held_.find(gang);
  return it == gang_held_.end() ? milli : std::max<int64_t>(0, milli - it->second);
}

std::optional<std::string> QueueBook::limitLocked(const std::string& queue, int64_t ask,
                                                  const std::string& product, const std::string& gang) const {
  const std::string who = "troupe: queue " + queue;
  const std::string asker = gang.empty() ? "this pod" : "gang " + gang;
  for (const std::string& q : tree_.lineage(queue)) {
    const std::string via = q == queue ? who + " is" : who + ": its parent queue " + q + " is";
    const QueueSpec& spec = *tree_.find(q);
    const int64_t held = heldTotalLocked(q);
    if (spec.limit.milli && held + ask > *spec.limit.milli) {
      return via + " at its limit: it holds " + gpusText(held) + " of " + gpus(*spec.limit.milli) + " and " +
             asker + " needs " + gpusText(ask) + " more";
    }
    auto lim = spec.limit.product_milli.find(product);
    if (lim != spec.limit.product_milli.end() && heldLocked(q, product) + ask > lim->second) {
      return via + " at its limit of " + productGpus(lim->second, product) + ": it holds " +
             gpusText(heldLocked(q, product)) + " and " + asker + " needs " + gpusText(ask) + " more";
    }
  }
  return std::nullopt;
}

std::optional<std::string> QueueBook::limitReason(const std::string& queue, int64_t milli,
                                                  const std::string& product, const std::string& gang) const {
  std::lock_guard lock(mu_);
  if (tree_.empty()) return std::nullopt;
  if (!tree_.find(queue)) return "troupe: queue " + queue + " does not exist or is not valid";
  return limitLocked(queue, askLocked(milli, gang), product, gang);
}

std::optional<std::string> QueueBook::admit(const std::string& queue, int64_t milli,
                                            const std::string& product, const std::string& gang) const {
  std::lock_guard lock(mu_);
  if (tree_.empty()) return std::nullopt;
  const std::vector<std::string> line = tree_.lineage(queue);
  if (line.empty()) return "troupe: queue " + queue + " does not exist or is not valid";
  const int64_t ask = askLocked(milli, gang);
  if (ask == 0) return std::nullopt;
  if (std::optional<std::string> limit = limitLocked(queue, ask, product, gang)) return limit;
  const std::string who = "troupe: queue " + queue;
  auto via = [&](const std::string& q) {
    return q == queue ? who + " is" : who + ": its parent queue " + q + " is";
  };
  // Fair share: beyond its share (all products together), a queue waits while a queue elsewhere
  // is below its own share with a pending pod that fits, accepts this product and would be
  // admitted (as of the last refresh).
  auto waiting = waiting_.find(product);
  if (waiting == waiting_.end()) return std::nullopt;
  const auto& below = waiting_below_.at(product);
  const int all = static_cast<int>(waiting->second.size());
  for (const std::string& q : line) {
    // In GPUs of all products together: a pending pod that accepts several products spreads its
    // ask over them, so a per-product share can be smaller than one pod of the queue.
    const int64_t held = heldTotalLocked(q);
    const int64_t share = shareTotalLocked(q);
    if (held + ask <= share) continue;
    auto inside = below.find(q);
    if (all - (inside == below.end() ? 0 : inside->second) == 0) continue;
    for (const std::string& other : waiting->second) {
      const std::vector<std::string> other_line = tree_.lineage(other);
      if (std::find(other_line.begin(), other_line.end(), q) != other_line.end()) continue;
      // It caught up since the last refresh: its pod would now go beyond its share.
      const int64_t next = fitting_ask_.at(other).milli;
      if (heldTotalLocked(other) + next > shareTotalLocked(other)) continue;
      const std::string asker = gang.empty() ? "this pod" : "gang " + gang;
      return via(q) + " above its fair share: with " + asker + " it would hold " + gpus(held + ask) +
             ", its fair share is " + gpus(share) + "; queue " + other + " holds " +
             gpusText(heldTotalLocked(other)) + " of its fair share of " + gpus(shareTotalLocked(other)) +
             " and has pending pods that fit";
    }
  }
  return std::nullopt;
}

std::optional<std::string> QueueBook::evictionVeto(const std::vector<std::string>& uids) const {
  std::lock_guard lock(mu_);
  if (tree_.empty()) return std::nullopt;
  // What the eviction takes from each queue (with its ancestors), per product.
  std::map<std::string, ProductMilli> taken;
  for (const std::string& uid : uids) {
    auto it = pods_.find(uid);
    if (it == pods_.end() || !it->second.bound()) continue;
    const QueuedPod& p = it->second;
    const QueueSpec* spec = tree_.find(p.queue);
    if (!spec) continue;
    if (!spec->preemptible) {
      return "troupe: queue " + p.queue + " is not preemptible: its pod " + p.key + " is not evicted";
    }
    for (const std::string& q : tree_.lineage(p.queue)) taken[q][p.product] += p.milli;
  }
  for (const auto& [q, products] : taken) {
    const QueueSpec& spec = *tree_.find(q);
    int64_t total = 0;
    for (const auto& [product, milli] : products) {
      total += milli;
      auto g = spec.guaranteed.product_milli.find(product);
      const int64_t held = heldLocked(q, product);
      if (g != spec.guaranteed.product_milli.end() && held - milli < g->second) {
        return "troupe: queue " + q + " would fall below its guaranteed " + productGpus(g->second, product) +
               ": it holds " + gpusText(held) + " and the eviction takes " + gpusText(milli);
      }
    }
    const int64_t held = heldTotalLocked(q);
    if (spec.guaranteed.milli && held - total < *spec.guaranteed.milli) {
      return "troupe: queue " + q + " would fall below its guaranteed " + gpus(*spec.guaranteed.milli) +
             ": it holds " + gpusText(held) + " and the eviction takes " + gpusText(total);
    }
  }
  return std::nullopt;
}

void QueueBook::markBound(const std::string& uid, const std::string& node, const std::string& product,
                          QueueClock::time_point since) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || (it->second.node == node && it->second.product == product)) return;
  accountLocked(it->second, -1);
  it->second.node = node;
  it->second.product = product;
  it->second.since = since;
  accountLocked(it->second, 1);
}

void QueueBook::countEviction(const std::string& queue, const std::string& reason) {
  std::lock_guard lock(mu_);
  ++evictions_[queue][reason];
}

std::vector<QueueStatus> QueueBook::statuses() const {
  std::lock_guard lock(mu_);
  std::map<std::string, QueueStatus> out;
  const std::map<std::string, QueueDemand> own = demandLocked();
  // Subtree demand per queue (own pods and children), for the explanation.
  std::map<std::string, ProductMilli> subtree_demand;
  for (const QueueSpec& spec : tree_.queues()) {
    QueueStatus& s = out[spec.name];
    s.spec = spec;
    if (auto f = fair_.find(spec.name); f != fair_.end()) s.fair_share = f->second;
    if (auto e = evictions_.find(spec.name); e != evictions_.end()) s.evictions = e->second;
    if (auto it = held_.find(spec.name); it != held_.end()) s.allocated = it->second;
    s.allocated_milli = heldTotalLocked(spec.name);
    s.dominant_share = dominantShare(s.allocated, capacity_);
    auto fits = pending_fits_.find(spec.name);
    s.pending_fits = fits != pending_fits_.end() && fits->second;
  }
  for (const auto& [uid, pod] : pods_) {
    const std::vector<std::string> line = tree_.lineage(pod.queue);
    for (const std::string& q : line) {
      QueueStatus& s = out[q];
      if (pod.bound()) {
        ++s.running_pods;
      } else {
        ++s.pending_pods;
        s.pending_milli += pod.milli;
        for (const auto& [product, milli] : spreadAsk(pod, capacity_)) s.pending[product] += milli;
      }
    }
  }
  for (const auto& [queue, d] : own) {
    for (const std::string& q : tree_.lineage(queue)) {
      for (const auto* part : {&d.allocated, &d.pending}) {
        for (const auto& [product, milli] : *part) subtree_demand[q][product] += milli;
      }
    }
  }
  auto demandOf = [&](const std::string& q) {
    int64_t sum = 0;
    if (auto it = subtree_demand.find(q); it != subtree_demand.end()) {
      for (const auto& [product, milli] : it->second) {
        if (capacity_.count(product)) sum += milli;
      }
    }
    return sum;
  };
  for (const QueueSpec& spec : tree_.queues()) {
    QueueStatus& s = out[spec.name];
    const int64_t guaranteed = spec.guaranteed.milli.value_or(0);
    s.below_guaranteed = s.pending_pods > 0 && guaranteed > 0 && s.allocated_milli < guaranteed;
    s.above_fair_share = s.allocated_milli > s.fair_share.total_milli;
    // How the numbers come about, e.g. "fair share 16 GPUs: weight 2 of 4 among 3 queues with
    // demand on 32 contested H100 GPUs; holds 12; 3 pods pending (8 GPUs)".
    std::string text;
    if (demandOf(spec.name) == 0) {
      text = "fair share 0 GPUs: no demand";
    } else {
      double weights = 0;
      int with_demand = 0;
      for (const std::string& sib : tree_.children(spec.parent)) {
        if (demandOf(sib) == 0) continue;
        weights += tree_.find(sib)->weight;
        ++with_demand;
      }
      if (!spec.parent.empty() && own.count(spec.parent)) {  // the parent's own pods take part too
        weights += 1;
        ++with_demand;
      }
      // The contested pool: the fleet's GPUs of the products it asks for (at the top), else
      // its parent's fair share of them.
      ProductMilli pool;
      for (const auto& [product, milli] : subtree_demand[spec.name]) {
        if (!capacity_.count(product) || milli <= 0) continue;
        pool[product] = spec.parent.empty() ? capacity_.at(product) : shareLocked(spec.parent, product);
      }
      int64_t pool_total = 0;
      std::string products;
      for (const auto& [product, milli] : pool) {
        pool_total += milli;
        products += (products.empty() ? "" : ", ") + productName(product) + " " + gpusText(milli);
      }
      text = "fair share " + gpus(s.fair_share.total_milli) + ": weight " + numberText(spec.weight) + " of " +
             numberText(weights) + " among " + std::to_string(with_demand) +
             (with_demand == 1 ? " queue" : " queues") + " with demand on " + gpusText(pool_total) +
             " contested " +
             (pool.size() == 1 ? productName(pool.begin()->first) + " GPUs" : "GPUs (" + products + ")");
      if (guaranteed > 0) text += ", " + gpusText(guaranteed) + " guaranteed";
    }
    if (spec.limit.milli) text += "; limit " + gpus(*spec.limit.milli);
    text += "; holds " + gpusText(s.allocated_milli) + "; " + std::to_string(s.pending_pods) +
            (s.pending_pods == 1 ? " pod" : " pods") + " pending (" + gpus(s.pending_milli) + ")";
    s.explanation = std::move(text);
  }
  for (const auto& [name, why] : tree_.invalid()) {
    QueueStatus& s = out[name];
    s.spec.name = name;
    s.invalid = why;
    s.explanation = "not used: " + why;
  }
  std::vector<QueueStatus> list;
  list.reserve(out.size());
  for (auto& [name, s] : out) list.push_back(std::move(s));
  return list;
}

}  // namespace troupe::sched
