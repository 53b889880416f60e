// Kubernetes Events about pods (core/v1), e.g. "GPUsAssigned: GPUs 0,1 of node h100-3, ...",
// so `kubectl describe pod` shows Troupe's decisions.
//
// Best effort and never in the way: events are queued and posted by a background thread; at
// most one per pod and reason per `per_key_interval`, at most `rate_per_second` overall (a
// token bucket with `burst`), and the queue is bounded. Failures are logged at debug level and
// dropped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "adapters/common/internal_errors.h"
#include "adapters/common/logger.h"
#include "adapters/kube/client/api_client.h"

namespace troupe::kube {

struct EventOptions {
  std::chrono::seconds per_key_interval{60};
  double rate_per_second = 10.0;
  int burst = 50;
  size_t queue_limit = 1000;
  std::string component = "troupe";
  std::string instance;  // reportingInstance, e.g. the host name
  // An exception while posting one event is counted here (where="events") and the event dropped.
  adapters::InternalErrors internal_errors;
};

struct PodRef {
  std::string ns;
  std::string name;
  std::string uid;
};

// The v1.Event body for a pod; `now` is seconds since the epoch (UTC).
std::string podEventJson(const PodRef& pod, const std::string& type, const std::string& reason,
                         const std::string& message, const EventOptions& options,
                         std::chrono::system_clock::time_point now);

class EventRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  EventRecorder(KubeTransport& api, adapters::Logger& logger, EventOptions options,
                std::function<Clock::time_point()> clock = {});
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  void start();  // the posting thread; without it, flush() posts
  void stop();   // posts nothing more; drops what is queued

  // Queues an event ("Normal" or "Warning"); false when rate-limited or the queue is full.
  // `rate_limited` false skips the token bucket (not the per-key interval or the queue limit):
  // for an event that must not be lost, one per act, e.g. a Reclaimed event on each evicted pod.
  bool podEvent(const PodRef& pod, const std::string& type, const std::string& reason,
                const std::string& message, bool rate_limited = true);
  // Posts what is queued, on this thread (tests; or before exit).
  void flush();

  uint64_t posted() const;
  uint64_t dropped() const;

 private:
  struct Pending {
    PodRef pod;
    std::string type, reason, message;
    std::chrono::system_clock::time_point at;
  };
  Clock::time_point now() const { return clock_ ? clock_() : Clock::now(); }
  void post(const Pending& e);
  void loop();

  KubeTransport& api_;
  adapters::Logger& logger_;
  const EventOptions options_;
  std::function<Clock::time_point()> clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  std::unordered_map<std::string, Clock::time_point> last_;  // uid/reason -> last accepted
  double tokens_;
  Clock::time_point refilled_{};
  bool stopping_ = false;
  uint64_t posted_ = 0, dropped_ = 0;
  std::thread thread_;
};

}  // namespace troupe::kube
