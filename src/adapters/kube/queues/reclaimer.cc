#include "adapters/kube/queues/reclaimer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "adapters/kube/runtime/bounded_workers.h"
#include "adapters/kube/watch/kube_objects.h"
#include "troupe/sched/cluster/gpu_amount.h"

namespace troupe::kube {

std::string evictionJson(const std::string& ns, const std::string& name, const std::string& uid,
                         bool dry_run) {
  nlohmann::ordered_json delete_options = {{"preconditions", {{"uid", uid}}}};
  if (dry_run) delete_options["dryRun"] = {"All"};
  nlohmann::ordered_json e = {{"apiVersion", "policy/v1"},
                              {"kind", "Eviction"},
                              {"metadata", {{"name", name}, {"namespace", ns}}},
                              {"deleteOptions", delete_options}};
  return e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ReclaimCore ReclaimCore::of(sched::Scheduler& scheduler) {
  return ReclaimCore{[&scheduler] { return scheduler.planReclaim(); },
                     [&scheduler](const sched::ReclaimPlan& plan, bool evicted, const std::string& why) {
                       scheduler.reclaimFinished(plan, evicted, why);
                     }};
}

Reclaimer::Reclaimer(KubeTransport& api, ReclaimCore core, EventRecorder* events, adapters::Logger& logger,
                     WaitingPods waiting, size_t max_in_flight)
    : api_(api),
      core_(std::move(core)),
      events_(events),
      logger_(logger),
      waiting_(std::move(waiting)),
      max_in_flight_(std::max<size_t>(1, max_in_flight)) {}

std::vector<Reclaimer::Result> Reclaimer::evictAll(const std::vector<sched::ReclaimVictim>& victims,
                                                   bool dry_run) {
  std::vector<Result> out(victims.size());
  forEachBounded(victims.size(), max_in_flight_, [&](size_t i) {
    out[i].status = evict(victims[i], dry_run, &out[i].gone);
    return true;
  });
  return out;
}

Status Reclaimer::evict(const sched::ReclaimVictim& victim, bool dry_run, bool* gone) {
  *gone = false;
  const auto [ns, name] = splitObjectKey(victim.key);
  ApiReply reply = api_.request("POST", "/api/v1/namespaces/" + ns + "/pods/" + name + "/eviction",
                                evictionJson(ns, name, victim.uid, dry_run));
  if (reply.ok()) return Status::ok();
  if (reply.kind == ApiErrorKind::kNotFound || reply.kind == ApiErrorKind::kConflict) {
    *gone = true;  // deleted already, or another pod now has its name
    return Status::ok();
  }
  if (reply.kind == ApiErrorKind::kThrottled) {
    return unavailable("a PodDisruptionBudget refuses evicting " + victim.key + " now (" + reply.message +
                       ")");
  }
  return toStatus(reply, std::string(dry_run ? "evict (dry run) pod " : "evict pod ") + victim.key);
}

void Reclaimer::tellWaiting(const sched::ReclaimPlan& plan, const std::string& type,
                            const std::string& reason, const std::string& message) {
  if (!events_ || !waiting_) return;
  // Each pod or gang the evictions made room for (a hand-made plan may name only for_key).
  std::vector<std::string> keys;
  for (const sched::ReclaimServed& s : plan.served) {
    if (s.evicts) keys.push_back(s.key);
  }
  if (keys.empty()) keys.push_back(plan.for_key);
  for (const std::string& key : keys) {
    for (const PodRef& pod : waiting_(key)) events_->podEvent(pod, type, reason, message);
  }
}

Reclaimer::Outcome Reclaimer::runOnce() {
  std::optional<sched::ReclaimPlan> plan = core_.plan();
  if (!plan) return Outcome::kNothing;
  ++stats_.plans;
  const std::string freed = sched::gpusText(plan->freed_milli);
  auto blocked = [&](const std::string& why) {
    ++stats_.blocked;
    logger_.warn("reclaim blocked", {{"queue", plan->queue}, {"for", plan->for_key}, {"why", why}});
    tellWaiting(*plan, "Warning", "ReclaimBlocked",
                "queue " + plan->queue + " cannot get its guaranteed GPUs back now: " + why);
    core_.finished(*plan, false, why);
    return Outcome::kBlocked;
  };
  // Dry runs first: all or nothing.
  for (const Result& r : evictAll(plan->victims, /*dry_run=*/true)) {
    if (!r.status.isOk()) return blocked(r.status.message());
  }
  std::string failures;
  size_t evicted = 0;
  const std::vector<Result> results = evictAll(plan->victims, /*dry_run=*/false);
  for (size_t i = 0; i < results.size(); ++i) {
    const sched::ReclaimVictim& v = plan->victims[i];
    if (!results[i].status.isOk()) {
      // Between the dry run and now something changed; the rest goes on, the plan says so.
      failures += (failures.empty() ? "" : "; ") + results[i].status.message();
      continue;
    }
    ++evicted;
    if (results[i].gone) continue;
    ++stats_.evicted_pods;
    const auto [ns, name] = splitObjectKey(v.key);
    // Not rate-limited: a round evicts many pods at once, and each must say why it was evicted.
    if (events_) events_->podEvent(PodRef{ns, name, v.uid}, "Normal", "Reclaimed", plan->reason, false);
  }
  logger_.info("reclaim", {{"queue", plan->queue},
                           {"for", plan->for_key},
                           {"evicted", std::to_string(evicted)},
                           {"of", std::to_string(plan->victims.size())},
                           {"gpus", freed},
                           {"reason", plan->reason},
                           {"failures", failures}});
  if (evicted == 0) return blocked(failures.empty() ? "no victim could be evicted" : failures);
  tellWaiting(*plan, "Normal", "ReclaimStarted",
              plan->reason + " (" + std::to_string(evicted) + " pods evicted, " + freed + " GPUs)");
  core_.finished(*plan, true, failures.empty() ? "evicted" : "partly evicted: " + failures);
  return Outcome::kEvicted;
}

}  // namespace troupe::kube
