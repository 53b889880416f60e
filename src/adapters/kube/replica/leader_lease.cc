#include "adapters/kube/replica/leader_lease.h"

#include "adapters/common/kube_json.h"

namespace troupe::kube {

Result<LeaseRef> parseLeaseRef(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size() ||
      text.find('/', slash + 1) != std::string::npos) {
    return invalidArgument("\"" + text +
                           "\" is not NAMESPACE/NAME: name kube-scheduler's leader-election Lease, e.g. "
                           "kube-system/troupe-scheduler");
  }
  return LeaseRef{text.substr(0, slash), text.substr(slash + 1)};
}

bool holdsLease(const std::string& holder, const std::string& hostname) {
  if (hostname.empty() || holder.empty()) return false;
  return holder == hostname ||
         (holder.size() > hostname.size() && holder.compare(0, hostname.size(), hostname) == 0 &&
          holder[hostname.size()] == '_');
}

LeaderCheck::LeaderCheck(KubeTransport& api, adapters::Logger& logger, std::optional<LeaseRef> lease,
                         std::string hostname, std::chrono::milliseconds stale_after,
                         std::function<Clock::time_point()> clock)
    : api_(api),
      logger_(logger),
      lease_(std::move(lease)),
      hostname_(std::move(hostname)),
      stale_after_(stale_after),
      clock_(std::move(clock)),
      active_(!lease_) {}

void LeaderCheck::set(bool active, const std::string& why) {
  if (read_once_ && active == active_) return;
  read_once_ = true;
  active_ = active;
  logger_.info(active ? "active replica: writing queue status and reclaiming"
                      : "standby replica: queue status and reclaim are left to the active one",
               {{"lease", lease_->ns + "/" + lease_->name}, {"holder", holder_}, {"why", why}});
}

bool LeaderCheck::refresh() {
  if (!lease_) return true;
  ApiReply reply = api_.request(
      "GET", "/apis/coordination.k8s.io/v1/namespaces/" + lease_->ns + "/leases/" + lease_->name);
  std::string error;
  if (reply.ok()) {
    adapters::Json doc = adapters::Json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      error = "the Lease is not JSON";
    } else {
      const adapters::Json* spec = adapters::field(doc, "spec");
      holder_ = adapters::textOf(spec ? adapters::field(*spec, "holderIdentity") : nullptr);
      last_read_ = now();
      last_error_.clear();
      set(holdsLease(holder_, hostname_),
          "the Lease's holder is " + (holder_.empty() ? "nobody" : holder_) + ", this host is " + hostname_);
      return active_;
    }
  } else {
    error = reply.kind == ApiErrorKind::kNotFound ? "no such Lease (kube-scheduler has not taken it yet)"
                                                  : reply.message;
  }
  if (error != last_error_) {
    logger_.warn("cannot read the leader Lease",
                 {{"lease", lease_->ns + "/" + lease_->name},
                  {"error", error},
                  {"fix",
                   "the Lease must be kube-scheduler's leader-election lease (--leader-lease), readable "
                   "by Troupe's service account (get leases)"}});
    last_error_ = error;
  }
  // A Lease that cannot be read keeps the last answer for a while (a blip of the API server),
  // then this replica stands by: two active ones would evict twice.
  if (!read_once_ || now() - last_read_ >= stale_after_) set(false, error);
  return active_;
}

}  // namespace troupe::kube
