#include "troupe/sched/filter/pending_pods.h"

#include <algorithm>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::sched {

uint64_t podFingerprint(const PodFacts& pod) {
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  auto mix = [&h](std::string_view text) {
    h ^= std::hash<std::string_view>{}(text) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h ^= text.size() * 0xBF58476D1CE4E5B9ULL;
    h *= 0x94D049BB133111EBULL;
  };
  auto mixMap = [&](const StringMap& map) {
    mix(std::to_string(map.size()));
    for (const auto& [key, value] : map) {
      mix(key);
      mix(value);
    }
  };
  auto mixContainers = [&](const std::vector<ContainerResources>& containers) {
    mix(std::to_string(containers.size()));
    for (const ContainerResources& c : containers) {
      mixMap(c.requests);
      mixMap(c.limits);
      mix(c.restartable_init ? "1" : "0");
    }
  };
  mix(pod.ns);
  mix(pod.name);
  mix(pod.uid);
  mixMap(pod.labels);
  mixMap(pod.annotations);
  mixContainers(pod.containers);
  mixContainers(pod.init_containers);
  mix(std::to_string(pod.priority));
  // What decides the gang, the nodes it may use and the devices DRA gives it.
  mix(pod.scheduling_group);
  mixMap(pod.node_selector);
  for (const PodClaim& c : pod.resource_claims) {
    mix(c.name);
    mix(c.claim_name);
    mix(c.template_name);
  }
  mix(pod.extended_resource_claim);
  mix(std::to_string(pod.claim_gpus));
  return h;
}

PendingPods::Seen PendingPods::remember(const PodFacts& pod, const GpuRequest& req, uint64_t fingerprint,
                                        const std::string& gang, uint64_t* seq) {
  if (pod.uid.empty()) return Seen::kFirst;
  std::lock_guard lock(mu_);
  if (deleted_.count(pod.uid)) return Seen::kDeleted;  // kube-scheduler's late call for a deleted pod
  auto [it, fresh] = pending_.try_emplace(pod.uid);
  it->second = PendingPod{req, fingerprint, pod.key(), ++seq_,       gang,         false,       {},
                          0,   "",          0,         pod.priority, std::nullopt, std::nullopt};
  if (seq) *seq = it->second.seq;
  if (pending_.size() > max_pending_) {
    // Forget the oldest tenth: pods that were filtered long ago and never bound.
    std::vector<std::pair<uint64_t, std::string>> order;
    order.reserve(pending_.size());
    for (const auto& [uid, p] : pending_) order.emplace_back(p.seq, uid);
    std::sort(order.begin(), order.end());
    for (size_t i = 0; i < order.size() / 10 + 1; ++i) pending_.erase(order[i].second);
  }
  return fresh ? Seen::kFirst : Seen::kAgain;
}

void PendingPods::recordPassed(const std::string& uid, uint64_t seq, NodeOrdinalSet passed, uint64_t births,
                               const std::string& queue, int gang_min, std::optional<ChosenGpus> chosen) {
  if (uid.empty()) return;
  std::lock_guard lock(mu_);
  auto it = pending_.find(uid);
  if (it == pending_.end() || it->second.seq != seq) return;  // a later filter of the pod won
  it->second.filtered = true;
  it->second.passed = std::move(passed);
  it->second.births = births;
  it->second.queue = queue;
  it->second.gang_min = gang_min;
  it->second.chosen = std::move(chosen);
}

void PendingPods::noteQueue(const std::string& uid, uint64_t seq, const std::string& queue) {
  if (uid.empty()) return;
  std::lock_guard lock(mu_);
  auto it = pending_.find(uid);
  if (it == pending_.end() || it->second.seq != seq) return;  // a later filter of the pod won
  it->second.resolved_queue = queue;
}

std::vector<std::pair<std::string, PendingPod>> PendingPods::refused() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, PendingPod>> out;
  for (const auto& [uid, p] : pending_) {
    if (p.refused()) out.emplace_back(uid, p);
  }
  return out;
}

std::optional<PendingPod> PendingPods::find(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = pending_.find(uid);
  if (it == pending_.end()) return std::nullopt;
  return it->second;
}

std::optional<GpuRequest> PendingPods::request(const std::string& uid, uint64_t fingerprint) const {
  std::lock_guard lock(mu_);
  auto it = pending_.find(uid);
  if (it == pending_.end() || it->second.fingerprint != fingerprint) return std::nullopt;
  return it->second.request;
}

void PendingPods::forget(const std::string& uid) {
  if (uid.empty()) return;
  std::lock_guard lock(mu_);
  pending_.erase(uid);
  if (deleted_.insert(uid).second) {
    deleted_order_.push_back(uid);
    while (deleted_order_.size() > max_deleted_) {
      deleted_.erase(deleted_order_.front());
      deleted_order_.pop_front();
    }
  }
}

bool PendingPods::deleted(const std::string& uid) const {
  std::lock_guard lock(mu_);
  return deleted_.count(uid) > 0;
}

size_t PendingPods::size() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

}  // namespace troupe::sched
