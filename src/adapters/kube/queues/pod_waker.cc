#include "adapters/kube/queues/pod_waker.h"

#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>

#include "adapters/kube/runtime/bounded_workers.h"
#include "adapters/kube/watch/kube_objects.h"

namespace troupe::kube {

std::string wakePatch(const std::string& uid, const std::string& stamp) {
  const nlohmann::json patch = {
      {"metadata", {{"uid", uid}, {"annotations", {{contract::kWakeAnnotation, stamp}}}}}};
  return patch.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

PodWaker::PodWaker(KubeTransport& api, Plan plan, StillPending pending, adapters::Logger& logger,
                   PodWakeOptions options, std::function<Clock::time_point()> clock)
    : api_(api),
      plan_(std::move(plan)),
      pending_(std::move(pending)),
      logger_(logger),
      options_(std::move(options)),
      clock_(std::move(clock)),
      planner_(options_.plan),
      tokens_(options_.burst) {}

void PodWaker::run(StopSignal& stop) {
  while (!stop.stopped()) {
    try {
      round(stop);
    } catch (const std::exception& e) {
      options_.internal_errors.count("waker");
      logger_.error("pod waker round failed", {{"error", e.what()}});
    }
    if (!stop.sleepFor(options_.every)) break;
  }
}

size_t PodWaker::round(StopSignal& stop) {
  std::vector<sched::WakeCandidate> pods = plan_(planner_);
  std::erase_if(pods, [&](const sched::WakeCandidate& c) { return pending_ && !pending_(c.uid); });
  if (pods.empty()) return 0;
  // Each round's writes carry one new value: a pod woken again gets a different one, so the
  // write is never a no-op the API server would drop without an update event.
  const std::string stamp = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count()) +
                            "-" + std::to_string(++stamp_);
  std::atomic<size_t> ok{0};
  forEachBounded(pods.size(), static_cast<size_t>(std::max(1, options_.max_in_flight)), [&](size_t i) {
    if (stop.stopped() || !takeToken(stop)) return false;
    if (wake(pods[i], stamp)) ++ok;
    return true;
  });
  std::string first;  // which pods, for the log: the first few
  for (size_t i = 0; i < pods.size() && i < 5; ++i) first += (i ? "," : "") + pods[i].key;
  if (pods.size() > 5) first += ",...";
  logger_.info(
      "woke pending pods Troupe's filter would pass now",
      {{"pods", std::to_string(ok.load())}, {"planned", std::to_string(pods.size())}, {"first", first}});
  return ok.load();
}

bool PodWaker::takeToken(StopSignal& stop) {
  while (!stop.stopped()) {
    Clock::duration wait{};
    {
      std::lock_guard lock(mu_);
      const Clock::time_point t = now();
      if (refilled_ != Clock::time_point{}) {
        const double secs = std::chrono::duration<double>(t - refilled_).count();
        tokens_ = std::min<double>(options_.burst, tokens_ + secs * options_.rate_per_second);
      }
      refilled_ = t;
      if (tokens_ >= 1) {
        tokens_ -= 1;
        return true;
      }
      wait = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>((1 - tokens_) / std::max(0.001, options_.rate_per_second)));
    }
    if (!stop.sleepFor(std::max<Clock::duration>(wait, std::chrono::milliseconds(1)))) return false;
  }
  return false;
}

bool PodWaker::wake(const sched::WakeCandidate& pod, const std::string& stamp) {
  const auto [ns, name] = splitObjectKey(pod.key);
  if (ns.empty()) return false;
  const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name + "/status";
  ApiReply r = api_.request("PATCH", path, wakePatch(pod.uid, stamp), "application/merge-patch+json");
  std::lock_guard lock(mu_);
  ++writes_;
  if (r.ok()) {
    ++woken_;
    logger_.debug("woke pod", {{"pod", pod.key}});
    return true;
  }
  if (r.kind == ApiErrorKind::kForbidden) {
    if (!warned_forbidden_) {
      warned_forbidden_ = true;
      logger_.warn(
          "cannot wake pending pods: patch on pods/status is forbidden (deploy/rbac.yaml grants it); "
          "pods Troupe refused wait for kube-scheduler's own retry",
          {{"pod", pod.key}, {"error", r.message}});
    }
  } else if (r.kind != ApiErrorKind::kNotFound) {  // gone meanwhile: nothing to wake
    logger_.debug("waking a pod failed", {{"pod", pod.key}, {"error", r.message}});
  }
  return false;
}

uint64_t PodWaker::writes() const {
  std::lock_guard lock(mu_);
  return writes_;
}

uint64_t PodWaker::woken() const {
  std::lock_guard lock(mu_);
  return woken_;
}

}  // namespace troupe::kube
