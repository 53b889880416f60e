#include "adapters/kube/defrag/defrag_advisor.h"

#include <algorithm>

#include "adapters/kube/queues/reclaimer.h"
#include "adapters/kube/watch/kube_objects.h"

namespace troupe::kube {
namespace {

bool connectedAsk(const sched::GpuRequest& req) {
  return req.topology == sched::TopologyMode::kNVLink || req.gpus > 1;
}

}  // namespace

DefragAdvisor::DefragAdvisor(KubeTransport& api, DefragCore core, EventRecorder* events,
                             adapters::Logger& logger, DefragOptions options, adapters::KubeMetrics* metrics)
    : api_(api),
      core_(std::move(core)),
      events_(events),
      logger_(logger),
      options_(std::move(options)),
      metrics_(metrics) {}

std::vector<DefragAdvisor::Ask> DefragAdvisor::asksOf(
    const std::vector<std::pair<std::string, ClusterSync::PendingPod>>& pending,
    std::chrono::system_clock::time_point now) const {
  std::map<std::string, Ask> by_key;
  for (const auto& [uid, pod] : pending) {
    // Without a parsed request, a creation time, or with GPUs a DRA claim serves (DRA chooses
    // the devices), there is nothing to plan for.
    if (!pod.request || !pod.created || !pod.request->wantsGpus() || pod.request->dra_only) continue;
    const bool gang = !pod.gang.empty();
    if (!gang && pod.request->gpus < options_.min_gpus) continue;
    const std::string key = gang ? pod.gang : pod.ns + "/" + pod.name;
    auto [it, fresh] = by_key.try_emplace(key);
    Ask& a = it->second;
    if (fresh) {
      a.ask.key = key;
      a.ask.request = *pod.request;
      a.ask.members = 0;
      a.since = *pod.created;
    }
    ++a.ask.members;
    a.since = std::min(a.since, *pod.created);
    a.pods.push_back(PodRef{pod.ns, pod.name, uid});
  }
  std::vector<Ask> out;
  for (auto& [key, a] : by_key) {
    if (now - a.since < options_.min_pending) continue;
    std::sort(a.pods.begin(), a.pods.end(), [](const PodRef& x, const PodRef& y) { return x.name < y.name; });
    out.push_back(std::move(a));
  }
  // The longest waiting first, then by key; at most max_asks.
  std::sort(out.begin(), out.end(), [](const Ask& x, const Ask& y) {
    return x.since != y.since ? x.since < y.since : x.ask.key < y.ask.key;
  });
  if (out.size() > options_.max_asks) out.resize(options_.max_asks);
  return out;
}

DefragAdvisor::Round DefragAdvisor::runOnce(std::chrono::system_clock::time_point now) {
  Round round;
  if (!options_.enabled) return round;
  const std::vector<std::pair<std::string, ClusterSync::PendingPod>> pending = core_.pending();
  std::set<std::string> pinned;  // pending pods never move
  for (const auto& [uid, pod] : pending) pinned.insert(uid);
  std::map<std::string, std::string> told;
  bool evicted_this_round = false;
  for (const Ask& a : asksOf(pending, now)) {
    ++round.asks;
    const sched::DefragAdvice advice = core_.advise(a.ask, pinned, options_.max_moves);
    if (advice.outcome != sched::DefragAdvice::Outcome::kPlan) continue;
    ++round.plans;
    round.gpus += advice.freedGpus();
    round.moves += advice.moves;
    const std::string what = sched::describeDefragAdvice(advice, connectedAsk(a.ask.request)) + " for this " +
                             (a.ask.members > 1 ? "gang (" + a.ask.key + ")" : std::string("pod"));
    std::string message = what + "; Troupe did not move them (defrag.evict is off)";
    if (options_.evict) {
      auto last = evicted_for_.find(a.ask.key);
      const bool cooling = last != evicted_for_.end() && now - last->second < kEvictCooldown;
      if (cooling) {
        message = what + "; Troupe evicted pods for it less than " + std::to_string(kEvictCooldown.count()) +
                  "m ago and waits for them to go before evicting more";
      } else if (evicted_this_round) {
        message = what + "; Troupe evicts them in a later round (one plan at a time)";
      } else {
        evicted_this_round = true;
        evicted_for_[a.ask.key] = now;
        const int n = evict(a, advice);
        round.evicted += n;
        if (n == 0) continue;  // DefragBlocked said why
        message = what + "; Troupe evicted them (defrag.evict is on): their controllers recreate them";
      }
    }
    auto prev = told_.find(a.ask.key);
    if (prev != told_.end() && prev->second == message) {
      told[a.ask.key] = message;  // told already
      continue;
    }
    logger_.info("defrag advice", {{"for", a.ask.key}, {"advice", message}});
    // Remembered only once posted: a rate-limited event is tried again next round.
    if (!events_ || a.pods.empty()) {
      told[a.ask.key] = message;
    } else if (events_->podEvent(a.pods.front(), "Normal", "DefragAdvice", message)) {
      told[a.ask.key] = message;
      ++round.events;
    }
  }
  told_ = std::move(told);  // advice no longer given is told again when it comes back
  std::erase_if(evicted_for_, [&](const auto& e) { return now - e.second >= kEvictCooldown; });
  if (metrics_) {
    metrics_->defragAdvice(round.plans, round.gpus, round.moves);
    if (round.evicted > 0) metrics_->defragEvicted(round.evicted);
  }
  return round;
}

int DefragAdvisor::evict(const Ask& ask, const sched::DefragAdvice& advice) {
  struct Victim {
    PodRef pod;
    std::string from, to;
  };
  std::vector<Victim> victims;
  for (const sched::DefragFreed& f : advice.freed) {
    for (const sched::DefragMove& m : f.moves) {
      const auto [ns, name] = splitObjectKey(m.pod_key);
      victims.push_back({PodRef{ns, name, m.pod_uid}, m.from, m.to});
    }
  }
  // OK, or why not; a pod already gone counts as evicted.
  auto post = [&](const Victim& v, bool dry_run) -> Status {
    ApiReply reply =
        api_.request("POST", "/api/v1/namespaces/" + v.pod.ns + "/pods/" + v.pod.name + "/eviction",
                     evictionJson(v.pod.ns, v.pod.name, v.pod.uid, dry_run));
    if (reply.ok() || reply.kind == ApiErrorKind::kNotFound || reply.kind == ApiErrorKind::kConflict)
      return Status::ok();
    if (reply.kind == ApiErrorKind::kThrottled) {
      return unavailable("a PodDisruptionBudget refuses evicting " + v.pod.ns + "/" + v.pod.name + " now (" +
                         reply.message + ")");
    }
    return toStatus(
        reply, std::string(dry_run ? "evict (dry run) pod " : "evict pod ") + v.pod.ns + "/" + v.pod.name);
  };
  for (const Victim& v : victims) {
    if (Status s = post(v, /*dry_run=*/true); !s.isOk()) {
      logger_.warn("defrag blocked", {{"for", ask.ask.key}, {"why", s.message()}});
      if (events_ && !ask.pods.empty())
        events_->podEvent(
            ask.pods.front(), "Warning", "DefragBlocked",
            "Troupe would move pods to make room for this pod but cannot evict them now: " + s.message());
      return 0;
    }
  }
  int evicted = 0;
  for (const Victim& v : victims) {
    if (Status s = post(v, /*dry_run=*/false); !s.isOk()) {
      logger_.warn("defrag eviction failed", {{"pod", v.pod.ns + "/" + v.pod.name}, {"why", s.message()}});
      continue;
    }
    ++evicted;
    if (events_)
      events_->podEvent(v.pod, "Normal", "Defragmented",
                        "evicted by Troupe to free GPUs on node " + v.from + " for " + ask.ask.key +
                            "; its controller recreates it (node " + v.to + " has room for it)");
  }
  logger_.info(
      "defrag evicted",
      {{"for", ask.ask.key}, {"evicted", std::to_string(evicted)}, {"of", std::to_string(victims.size())}});
  return evicted;
}

}  // namespace troupe::kube
