#include "adapters/kube/pod_groups.h"

#include "adapters/kube/kube_objects.h"

namespace troupe::kube {
namespace {

constexpr const char* kGroupVersion = "/apis/scheduling.x-k8s.io/v1alpha1";

}  // namespace

PodGroupCache::PodGroupCache(KubeTransport& api, adapters::Logger& logger, PodGroupOptions options,
                             std::function<Clock::time_point()> clock)
    : api_(api), logger_(logger), options_(options), clock_(std::move(clock)) {}

uint64_t PodGroupCache::apiReads() const {
  std::lock_guard lock(mu_);
  return reads_;
}

void PodGroupCache::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  entries_.erase(key);
}

sched::PodGroupInfo PodGroupCache::lookup(const std::string& ns, const std::string& name) {
  const std::string key = ns + "/" + name;
  {
    std::lock_guard lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end() && now() < it->second.expires)
      return it->second.info;
  }
  // Not under the lock: two filters of one new group may both read it, which is harmless.
  std::chrono::milliseconds ttl{0};
  sched::PodGroupInfo info = read(ns, name, &ttl);
  std::lock_guard lock(mu_);
  const Clock::time_point t = now();
  if (entries_.size() >= options_.max_entries) {
    for (auto it = entries_.begin(); it != entries_.end();)
      it = t >= it->second.expires ? entries_.erase(it) : std::next(it);
    if (entries_.size() >= options_.max_entries) entries_.clear();
  }
  entries_[key] = Entry{info, t + ttl};
  return info;
}

sched::PodGroupInfo PodGroupCache::read(const std::string& ns, const std::string& name,
                                        std::chrono::milliseconds* ttl) {
  const std::string what = "PodGroup " + ns + "/" + name;
  *ttl = options_.missing_ttl;
  std::string why;
  if (!crdInstalled(&why)) {
    *ttl = options_.no_crd_ttl;
    return {std::nullopt, why};
  }
  ApiReply r = api_.request(
      "GET", std::string(kGroupVersion) + "/namespaces/" + urlEncode(ns) + "/podgroups/" + urlEncode(name));
  {
    std::lock_guard lock(mu_);
    ++reads_;
  }
  if (r.kind == ApiErrorKind::kNotFound) return {std::nullopt, what + " does not exist"};
  if (r.kind == ApiErrorKind::kForbidden) {
    return {std::nullopt, "Troupe may not read " + what +
                              " (RBAC: grant get on podgroups in API group scheduling.x-k8s.io)"};
  }
  if (!r.ok()) {
    logger_.debug("PodGroup not read", {{"podgroup", ns + "/" + name}, {"error", r.message}});
    return {std::nullopt, "reading " + what + " failed (" + r.message + ")"};
  }
  Result<Json> doc = parseKubeJson(r.body);
  if (doc.isOk() && doc.value().is_object()) {
    auto spec = doc.value().find("spec");
    if (spec != doc.value().end() && spec->is_object()) {
      auto min = spec->find("minMember");
      if (min != spec->end() && min->is_number_integer() && min->get<int64_t>() >= 1 &&
          min->get<int64_t>() <= 100000) {
        *ttl = options_.found_ttl;
        return {static_cast<int>(min->get<int64_t>()), ""};
      }
    }
  }
  return {std::nullopt, what + " has no spec.minMember from 1 to 100000"};
}

bool PodGroupCache::crdInstalled(std::string* why) {
  {
    std::lock_guard lock(mu_);
    if (crd_known_ && now() - crd_checked_ < options_.no_crd_ttl) {
      if (!crd_installed_)
        *why = "the PodGroup CRD (podgroups.scheduling.x-k8s.io, v1alpha1) is not installed";
      return crd_installed_;
    }
  }
  ApiReply r = api_.request("GET", kGroupVersion);
  std::lock_guard lock(mu_);
  ++reads_;
  if (r.kind == ApiErrorKind::kNotFound) {
    crd_known_ = true;
    crd_installed_ = false;
    crd_checked_ = now();
    *why = "the PodGroup CRD (podgroups.scheduling.x-k8s.io, v1alpha1) is not installed";
    return false;
  }
  if (r.ok()) {
    crd_known_ = true;
    crd_installed_ = true;
    crd_checked_ = now();
    return true;
  }
  // Unknown (e.g. the API server is restarting): ask the object itself, and discovery again next time.
  return true;
}

}  // namespace troupe::kube
