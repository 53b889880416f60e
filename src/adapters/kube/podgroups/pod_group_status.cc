#include "adapters/kube/podgroups/pod_group_status.h"

#include "adapters/kube/watch/kube_objects.h"

namespace troupe::kube {
namespace {

constexpr size_t kMaxQueued = 10000;
constexpr int kMaxAttempts = 5;

std::string objectPath(const std::string& base, const std::string& key) {
  const size_t slash = key.find('/');
  return base + "/namespaces/" + urlEncode(key.substr(0, slash)) + "/podgroups/" +
         urlEncode(key.substr(slash + 1));
}

}  // namespace

PodGroupStatusWriter::PodGroupStatusWriter(KubeTransport& api, adapters::Logger& logger, WallClock wall,
                                           std::chrono::milliseconds settle, NativePodGroupApi* native)
    : api_(api), logger_(logger), wall_(std::move(wall)), settle_(settle), native_(native) {
  if (!native_) {
    owned_native_ = std::make_unique<NativePodGroupApi>(api_);
    native_ = owned_native_.get();
  }
}

void PodGroupStatusWriter::enqueue(const std::string& key, bool scheduled, const std::string& message) {
  if (key.find('/') == std::string::npos) return;
  const auto due = std::chrono::steady_clock::now() + settle_;
  std::lock_guard lock(mu_);
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    if (pending_.size() >= kMaxQueued) return;  // a stalled writer must not grow memory
    pending_.emplace(key, Pending{scheduled, message, 0, due});
    return;
  }
  // Admission outranks a timeout queued before it was written.
  if (it->second.scheduled && !scheduled) return;
  it->second = Pending{scheduled, message, 0, due};
}

void PodGroupStatusWriter::drop() {
  std::lock_guard lock(mu_);
  pending_.clear();
}

size_t PodGroupStatusWriter::queued() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

size_t PodGroupStatusWriter::flush() {
  std::map<std::string, Pending> batch;
  {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.due <= now) {
        batch.insert(pending_.extract(it++));
      } else {
        ++it;
      }
    }
  }
  size_t written = 0;
  for (auto& [key, p] : batch) {
    if (write(key, p)) {
      ++written;
      continue;
    }
    if (++p.attempts >= kMaxAttempts) continue;
    std::lock_guard lock(mu_);
    pending_.emplace(key, p);  // a newer notice queued meanwhile wins
  }
  return written;
}

bool PodGroupStatusWriter::write(const std::string& key, const Pending& p) {
  const NativePodGroupApi::Served served = native_->served();
  if (served.unknown) return false;         // try again later
  if (served.version.empty()) return true;  // not served: nothing to write
  const std::string path = objectPath(served.path(), key);
  const std::string type = nativeScheduledCondition(served.version);
  ApiReply got = api_.request("GET", path);
  if (got.kind == ApiErrorKind::kNotFound) return true;  // gone (or the API is not served)
  if (!got.ok()) {
    logger_.warn("PodGroup status not written", {{"podgroup", key}, {"error", got.message}});
    return false;
  }
  // Not parseKubeJson: it drops every "conditions" (pods' are not needed), and they are the point here.
  const Json obj = Json::parse(got.body, nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded() || !obj.is_object()) return true;
  const std::string status = p.scheduled ? "True" : "False";
  const std::string reason = p.scheduled ? "Scheduled" : "Unschedulable";
  std::string transition = formatApiTime(wall_ ? wall_() : std::chrono::system_clock::now());
  for (const ApiCondition& c : conditionsOf(obj)) {
    if (c.type != type) continue;
    // kube-scheduler's rule: a scheduled group is not reported unschedulable afterwards.
    if (c.status == "True" && !p.scheduled) return true;
    if (c.status == status && c.reason == reason && c.message == p.message) return true;
    if (c.status == status && !c.last_transition.empty()) transition = c.last_transition;
  }
  int64_t generation = 0;
  if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) {
    if (auto g = m->find("generation"); g != m->end() && g->is_number_integer())
      generation = g->get<int64_t>();
  }
  Json condition = {{"type", type},
                    {"status", status},
                    {"reason", reason},
                    {"message", p.message},
                    {"lastTransitionTime", transition}};
  if (generation > 0) condition["observedGeneration"] = generation;
  const Json patch = {{"status", {{"conditions", Json::array({condition})}}}};
  ApiReply r =
      api_.request("PATCH", path + "/status", patch.dump(-1, ' ', false, Json::error_handler_t::replace),
                   "application/strategic-merge-patch+json");
  if (r.kind == ApiErrorKind::kNotFound) return true;
  if (!r.ok()) {
    logger_.warn("PodGroup status not written", {{"podgroup", key}, {"error", r.message}});
    return false;
  }
  logger_.info("PodGroup status written",
               {{"podgroup", key}, {"condition", type + "=" + status}, {"version", served.version}});
  return true;
}

}  // namespace troupe::kube
