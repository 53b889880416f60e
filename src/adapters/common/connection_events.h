// What an HTTP listener reports about its connections, counted by the app as
// troupe_http_connections_closed_total{port,reason} and troupe_http_accept_errors_total{port}.
// Like InternalErrors, a pair of counting functions: the HTTP adapter stays testable without
// Prometheus, and the app decides where the counts go.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <utility>

namespace troupe::adapters {

// Why a listener closed a connection on its own (a bounded set of label values).
inline constexpr const char* kClosedEvictedNew = "evicted_new";  // at the cap: no byte sent yet
inline constexpr const char* kClosedEvictedStarted =
    "evicted_started";                                             // at the cap: a header begun, none done
inline constexpr const char* kClosedEvictedIdle = "evicted_idle";  // at the cap: kept alive, idle longest
inline constexpr const char* kClosedRefused = "refused";  // at the cap with every connection mid-request
inline constexpr const char* kClosedHeaderTimeout = "header_timeout";  // limits.headerTimeoutSeconds
inline constexpr const char* kClosedReadTimeout = "read_timeout";      // limits.readTimeoutSeconds
inline constexpr const char* kClosedIdleTimeout = "idle_timeout";      // limits.idleTimeoutSeconds
inline constexpr const char* kClosedWriteTimeout = "write_timeout";    // limits.writeTimeoutSeconds
inline constexpr std::array<const char*, 8> kConnectionCloseReasons = {
    kClosedEvictedNew,    kClosedEvictedStarted, kClosedEvictedIdle, kClosedRefused,
    kClosedHeaderTimeout, kClosedReadTimeout,    kClosedIdleTimeout, kClosedWriteTimeout};

class ConnectionEvents {
 public:
  using Closed = std::function<void(const std::string& reason)>;
  using AcceptFailed = std::function<void()>;
  ConnectionEvents() = default;  // counts nowhere (tests, tools)
  ConnectionEvents(Closed closed, AcceptFailed accept_failed)
      : closed_(std::move(closed)), accept_failed_(std::move(accept_failed)) {}

  // Never throw: a sink that fails is ignored.
  void closed(const std::string& reason) const noexcept {
    if (!closed_) return;
    try {
      closed_(reason);
    } catch (...) {
    }
  }
  void acceptFailed() const noexcept {
    if (!accept_failed_) return;
    try {
      accept_failed_();
    } catch (...) {
    }
  }

 private:
  Closed closed_;
  AcceptFailed accept_failed_;
};

}  // namespace troupe::adapters
