// Which replica is the active one: with several replicas, only the one whose kube-scheduler
// holds the leader-election Lease writes the Queues' status and reclaims (the others keep their
// caches warm). kube-scheduler's holderIdentity is "<hostname>_<uuid>", and Troupe runs in the
// same pod, so it is active when the holder starts with its own host name. Without a Lease
// (one replica) it is always active.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "adapters/common/logger.h"
#include "adapters/kube/client/api_client.h"
#include "troupe/common/status.h"

namespace troupe::kube {

struct LeaseRef {
  std::string ns;
  std::string name;
};

// "NAMESPACE/NAME" (--leader-lease); the error says what is expected.
Result<LeaseRef> parseLeaseRef(const std::string& text);

// Whether `holder` (a Lease's spec.holderIdentity) is this host's: "<hostname>_..." or the host
// name itself.
bool holdsLease(const std::string& holder, const std::string& hostname);

class LeaderCheck {
 public:
  using Clock = std::chrono::steady_clock;
  // `stale_after`: how long a Lease that cannot be read keeps the last answer (then: standby).
  LeaderCheck(KubeTransport& api, adapters::Logger& logger, std::optional<LeaseRef> lease,
              std::string hostname, std::chrono::milliseconds stale_after = std::chrono::seconds(15),
              std::function<Clock::time_point()> clock = {});

  // Reads the Lease (if any) and returns whether this replica is active now.
  bool refresh();
  bool active() const { return active_; }
  const std::string& holder() const { return holder_; }

 private:
  Clock::time_point now() const { return clock_ ? clock_() : Clock::now(); }
  void set(bool active, const std::string& why);

  KubeTransport& api_;
  adapters::Logger& logger_;
  const std::optional<LeaseRef> lease_;
  const std::string hostname_;
  const std::chrono::milliseconds stale_after_;
  std::function<Clock::time_point()> clock_;
  bool active_;
  bool read_once_ = false;
  std::string holder_;
  Clock::time_point last_read_{};
  std::string last_error_;
};

}  // namespace troupe::kube
