// A stop request shared by a background loop and whatever it blocks on: interruptible sleeps,
// and callbacks that abort in-flight I/O (a watch stream) when stop() is called.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace troupe::kube {

class StopSignal {
 public:
  StopSignal() = default;
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  void stop() {
    std::map<uint64_t, std::function<void()>> callbacks;
    {
      std::lock_guard lock(mu_);
      if (stopped_.exchange(true)) return;
      callbacks.swap(callbacks_);
    }
    cv_.notify_all();
    for (auto& [id, cb] : callbacks) cb();
  }
  bool stopped() const { return stopped_.load(); }

  // Sleeps for `d`; false when woken by stop().
  template <typename Rep, typename Period>
  bool sleepFor(std::chrono::duration<Rep, Period> d) {
    std::unique_lock lock(mu_);
    return !cv_.wait_for(lock, d, [this] { return stopped_.load(); });
  }

  // Runs `cb` on stop() (at once when already stopped). Returns an id for unsubscribe().
  uint64_t subscribe(std::function<void()> cb) {
    {
      std::lock_guard lock(mu_);
      if (!stopped_) {
        callbacks_.emplace(++next_id_, std::move(cb));
        return next_id_;
      }
    }
    cb();
    return 0;
  }
  void unsubscribe(uint64_t id) {
    std::lock_guard lock(mu_);
    callbacks_.erase(id);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stopped_{false};
  std::map<uint64_t, std::function<void()>> callbacks_;
  uint64_t next_id_ = 0;
};

}  // namespace troupe::kube
