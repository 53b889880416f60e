#include "adapters/kube/podgroups/pod_groups.h"

#include "adapters/kube/watch/kube_objects.h"

namespace troupe::kube {
namespace {

constexpr const char* kGroupVersion = "/apis/scheduling.x-k8s.io/v1alpha1";

bool validMin(const Json& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 100000;
}

// The object's field `key`, or nullptr when absent or null (`basic: null` is no policy).
const Json* member(const Json& object, const char* key) {
  const Json* v = adapters::field(object, key);
  return v && !v->is_null() ? v : nullptr;
}

}  // namespace

PodGroupCache::PodGroupCache(KubeTransport& api, adapters::Logger& logger, PodGroupOptions options,
                             std::function<Clock::time_point()> clock, PodGroupApi which,
                             NativePodGroupApi* native)
    : api_(api),
      logger_(logger),
      options_(options),
      clock_(std::move(clock)),
      which_(which),
      group_version_(kGroupVersion),
      native_(native) {
  if (which_ == PodGroupApi::kNative && !native_) {
    owned_native_ = std::make_unique<NativePodGroupApi>(api_, options_.no_crd_ttl, clock_);
    native_ = owned_native_.get();
  }
}

std::string PodGroupCache::notServed() const {
  if (which_ == PodGroupApi::kNative) return NativePodGroupApi::notServedReason();
  return "the PodGroup CRD (podgroups.scheduling.x-k8s.io, v1alpha1) is not installed";
}

sched::PodGroupInfo PodGroupCache::decode(const std::string& what, const std::string& body) const {
  Result<Json> doc = parseKubeJson(body);
  if (!doc.isOk()) {
    if (which_ == PodGroupApi::kSchedulerPlugins)
      return {std::nullopt, what + " has no spec.minMember from 1 to 100000"};
    return {std::nullopt, what + " could not be parsed"};
  }
  return decodeObject(what, doc.value());
}

sched::PodGroupInfo PodGroupCache::decodeObject(const std::string& what, const Json& object) const {
  const Json* spec = member(object, "spec");
  if (which_ == PodGroupApi::kSchedulerPlugins) {
    const Json* min = spec ? member(*spec, "minMember") : nullptr;
    if (min && validMin(*min)) return {static_cast<int>(min->get<int64_t>()), ""};
    return {std::nullopt, what + " has no spec.minMember from 1 to 100000"};
  }
  const NativePodGroup g = decodeNativePodGroup(object, what);
  sched::PodGroupInfo info;
  info.min_member = g.min_count;
  info.basic = g.basic;
  info.absent = g.error;
  if (g.error.empty()) info.topology_key = g.topology_key;
  info.priority = g.priority;
  info.composite_parent = g.parent_composite;
  return info;
}

uint64_t PodGroupCache::apiReads() const {
  std::lock_guard lock(mu_);
  return reads_;
}

void PodGroupCache::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  entries_.erase(key);
}

size_t PodGroupCache::watchedCount() const {
  std::lock_guard lock(mu_);
  return watched_.size();
}

void PodGroupCache::beginWatchList() {
  std::lock_guard lock(mu_);
  listing_ = true;
  relisted_.clear();
}

void PodGroupCache::endWatchList() {
  std::lock_guard lock(mu_);
  // What the list did not show again was deleted while the watch was away.
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (relisted_.count(it->first)) {
      ++it;
    } else {
      entries_.erase(it->first);
      it = watched_.erase(it);
    }
  }
  relisted_.clear();
  listing_ = false;
}

void PodGroupCache::watchEvent(WatchEventType type, const Json& object) {
  const std::string name = nameOf(object);
  const Json* meta = member(object, "metadata");
  const std::string ns = meta ? adapters::textOf(member(*meta, "namespace")) : std::string();
  if (name.empty() || ns.empty()) return;
  const std::string key = ns + "/" + name;
  std::optional<int> changed;
  {
    std::lock_guard lock(mu_);
    entries_.erase(key);  // the watch's copy is newer than a GET's
    if (type == WatchEventType::kDeleted) {
      watched_.erase(key);
      return;
    }
    sched::PodGroupInfo info = decodeObject("PodGroup " + key, object);
    if (listing_) relisted_.insert(key);
    auto it = watched_.find(key);
    if (info.min_member && (it == watched_.end() || it->second.min_member != info.min_member))
      changed = info.min_member;
    watched_[key] = std::move(info);
  }
  // After the cache holds it: a filter from now on reads the same minimum the core is given.
  if (changed && on_min_changed_) on_min_changed_(key, *changed);
}

sched::PodGroupInfo PodGroupCache::lookup(const std::string& ns, const std::string& name) {
  const std::string key = ns + "/" + name;
  {
    std::lock_guard lock(mu_);
    if (auto w = watched_.find(key); w != watched_.end()) return w->second;
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
  std::string base = group_version_;
  if (which_ == PodGroupApi::kNative) {
    base = nativePath(&why, ttl);
    if (base.empty()) return {std::nullopt, why};
  } else if (!crdInstalled(&why)) {
    *ttl = options_.no_crd_ttl;
    return {std::nullopt, why};
  }
  ApiReply r = api_.request("GET", base + "/namespaces/" + urlEncode(ns) + "/podgroups/" + urlEncode(name));
  {
    std::lock_guard lock(mu_);
    ++reads_;
  }
  if (r.kind == ApiErrorKind::kNotFound) return {std::nullopt, what + " does not exist"};
  if (r.kind == ApiErrorKind::kForbidden) {
    return {std::nullopt, "Troupe may not read " + what + " (RBAC: grant get on podgroups in API group " +
                              (which_ == PodGroupApi::kNative ? "scheduling.k8s.io" : "scheduling.x-k8s.io") +
                              ")"};
  }
  if (!r.ok()) {
    logger_.debug("PodGroup not read", {{"podgroup", ns + "/" + name}, {"error", r.message}});
    return {std::nullopt, "reading " + what + " failed (" + r.message + ")"};
  }
  sched::PodGroupInfo info = decode(what, r.body);
  if (info.min_member || info.basic) *ttl = options_.found_ttl;
  return info;
}

std::string PodGroupCache::nativePath(std::string* why, std::chrono::milliseconds* ttl) {
  const NativePodGroupApi::Served served = native_->served();
  if (!served.version.empty()) return served.path();
  if (served.unknown) {
    *why = "asking the API server which Workload API version it serves failed (" + served.error + ")";
  } else {
    *ttl = options_.no_crd_ttl;
    *why = notServed();
  }
  return "";
}

bool PodGroupCache::crdInstalled(std::string* why) {
  {
    std::lock_guard lock(mu_);
    if (crd_known_ && now() - crd_checked_ < options_.no_crd_ttl) {
      if (!crd_installed_) *why = notServed();
      return crd_installed_;
    }
  }
  ApiReply r = api_.request("GET", group_version_);
  std::lock_guard lock(mu_);
  ++reads_;
  if (r.kind == ApiErrorKind::kNotFound) {
    crd_known_ = true;
    crd_installed_ = false;
    crd_checked_ = now();
    *why = notServed();
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
