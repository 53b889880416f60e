#include "adapters/kube/bind/events.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "adapters/kube/watch/kube_objects.h"

namespace troupe::kube {

std::string podEventJson(const PodRef& pod, const std::string& type, const std::string& reason,
                         const std::string& message, const EventOptions& options,
                         std::chrono::system_clock::time_point now) {
  const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".%llx", static_cast<unsigned long long>(nanos));
  const std::string ts = formatApiTime(now);
  nlohmann::ordered_json e = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", pod.name.substr(0, 200) + suffix}, {"namespace", pod.ns}}},
      {"involvedObject",
       {{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", pod.ns}, {"name", pod.name}, {"uid", pod.uid}}},
      {"reason", reason},
      {"message", message.substr(0, 1024)},
      {"type", type},
      {"source", {{"component", options.component}}},
      {"firstTimestamp", ts},
      {"lastTimestamp", ts},
      {"count", 1},
      {"reportingComponent", options.component},
      {"reportingInstance", options.instance},
  };
  return e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

EventRecorder::EventRecorder(KubeTransport& api, adapters::Logger& logger, EventOptions options,
                             std::function<Clock::time_point()> clock)
    : api_(api),
      logger_(logger),
      options_(std::move(options)),
      clock_(std::move(clock)),
      tokens_(static_cast<double>(options_.burst)) {
  refilled_ = now();
}

EventRecorder::~EventRecorder() { stop(); }

void EventRecorder::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { loop(); });
}

void EventRecorder::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped_ += queue_.size();
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool EventRecorder::podEvent(const PodRef& pod, const std::string& type, const std::string& reason,
                             const std::string& message, bool rate_limited) {
  std::lock_guard lock(mu_);
  if (stopping_) return false;
  const Clock::time_point t = now();
  // Token bucket.
  const double elapsed = std::chrono::duration<double>(t - refilled_).count();
  tokens_ = std::min(static_cast<double>(options_.burst), tokens_ + elapsed * options_.rate_per_second);
  refilled_ = t;
  const std::string key = pod.uid + "/" + reason;
  auto last = last_.find(key);
  if ((last != last_.end() && t - last->second < options_.per_key_interval) ||
      (rate_limited && tokens_ < 1.0) || queue_.size() >= options_.queue_limit) {
    ++dropped_;
    return false;
  }
  if (rate_limited) tokens_ -= 1.0;
  if (last_.size() > 10000) {
    // Forget keys older than the interval; they no longer limit anything.
    for (auto it = last_.begin(); it != last_.end();) {
      it = t - it->second >= options_.per_key_interval ? last_.erase(it) : std::next(it);
    }
  }
  last_[key] = t;
  queue_.push_back(Pending{pod, type, reason, message, std::chrono::system_clock::now()});
  cv_.notify_one();
  return true;
}

void EventRecorder::post(const Pending& e) {
  const std::string body = podEventJson(e.pod, e.type, e.reason, e.message, options_, e.at);
  ApiReply r = api_.request("POST", "/api/v1/namespaces/" + e.pod.ns + "/events", body);
  std::lock_guard lock(mu_);
  if (r.ok()) {
    ++posted_;
  } else {
    ++dropped_;
    logger_.debug("event not posted",
                  {{"pod", e.pod.ns + "/" + e.pod.name}, {"reason", e.reason}, {"error", r.message}});
  }
}

void EventRecorder::flush() {
  for (;;) {
    Pending e;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty()) return;
      e = std::move(queue_.front());
      queue_.pop_front();
    }
    post(e);
  }
}

void EventRecorder::loop() {
  for (;;) {
    Pending e;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      e = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!adapters::guarded(logger_, options_.internal_errors, adapters::kWhereEvents,
                           "posting event " + e.reason + " of pod " + e.pod.ns + "/" + e.pod.name,
                           [&] { post(e); })) {
      std::lock_guard lock(mu_);
      ++dropped_;
    }
  }
}

uint64_t EventRecorder::posted() const {
  std::lock_guard lock(mu_);
  return posted_;
}

uint64_t EventRecorder::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

}  // namespace troupe::kube
