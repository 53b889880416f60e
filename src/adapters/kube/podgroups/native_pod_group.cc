#include "adapters/kube/podgroups/native_pod_group.h"

#include <limits>

namespace troupe::kube {
namespace {

using adapters::Json;

// The object's field `key`, or nullptr when absent or null (`basic: null` is no policy).
const Json* member(const Json* object, const char* key) {
  if (!object || !object->is_object()) return nullptr;
  const Json* v = adapters::field(*object, key);
  return v && !v->is_null() ? v : nullptr;
}

std::string text(const Json* v) { return v && v->is_string() ? v->get<std::string>() : std::string(); }

}  // namespace

std::string nativeScheduledCondition(const std::string& version) {
  return version == "v1alpha2" ? "PodGroupScheduled" : "PodGroupInitiallyScheduled";
}

NativePodGroup decodeNativePodGroup(const Json& object, const std::string& what) {
  NativePodGroup g;
  const Json* spec = member(&object, "spec");
  const Json* policy = member(spec, "schedulingPolicy");
  const Json* min = member(member(policy, "gang"), "minCount");
  if (min && min->is_number_integer() && min->get<int64_t>() >= 1 && min->get<int64_t>() <= 100000) {
    g.min_count = static_cast<int>(min->get<int64_t>());
  } else if (member(policy, "basic")) {
    g.basic = true;
  } else {
    g.error = what +
              " has neither spec.schedulingPolicy.gang.minCount from 1 to 100000 nor "
              "spec.schedulingPolicy.basic";
  }
  const Json* topology = member(member(spec, "schedulingConstraints"), "topology");
  if (topology && topology->is_array() && !topology->empty())
    g.topology_key = text(member(&(*topology)[0], "key"));

  if (const Json* ref = member(spec, "workloadRef")) {  // v1beta1+
    g.workload_name = text(member(ref, "workloadName"));
    g.template_name = text(member(ref, "templateName"));
  } else if (const Json* old = member(member(spec, "podGroupTemplateRef"), "workload")) {  // v1alpha2
    g.workload_name = text(member(old, "workloadName"));
    g.template_name = text(member(old, "podGroupTemplateName"));
  }
  g.parent_composite = text(member(spec, "parentCompositePodGroupName"));

  if (const Json* mode = member(spec, "disruptionMode")) {
    // v1alpha2: a string; v1beta1+: a one-of struct whose default is single.
    g.disruption_all =
        mode->is_string() ? mode->get<std::string>() == "PodGroup" : member(mode, "all") != nullptr;
  }
  g.priority_class_name = text(member(spec, "priorityClassName"));
  if (const Json* p = member(spec, "priority"); p && p->is_number_integer()) {
    const int64_t v = p->get<int64_t>();
    if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max())
      g.priority = static_cast<int32_t>(v);
  }
  g.preemption_policy = text(member(spec, "preemptionPolicy"));
  return g;
}

NativePodGroupApi::NativePodGroupApi(KubeTransport& api, std::chrono::milliseconds ttl,
                                     std::function<Clock::time_point()> clock)
    : api_(api), ttl_(ttl), clock_(std::move(clock)) {}

std::string NativePodGroupApi::notServedReason() {
  return "the Workload API (scheduling.k8s.io PodGroups: v1, v1beta1 or v1alpha2) is not served: on "
         "Kubernetes 1.37 start kube-apiserver with --feature-gates=GenericWorkload=true and "
         "--runtime-config=scheduling.k8s.io/v1beta1=true; on 1.36 with "
         "--feature-gates=GenericWorkload=true,GangScheduling=true and "
         "--runtime-config=scheduling.k8s.io/v1alpha2=true";
}

uint64_t NativePodGroupApi::discoveryReads() const {
  std::lock_guard lock(mu_);
  return reads_;
}

NativePodGroupApi::Served NativePodGroupApi::served() {
  {
    std::lock_guard lock(mu_);
    if (known_ && now() - checked_ < ttl_) return *known_;
  }
  // Not under the lock: discovery may take a while, and two threads asking at once is harmless.
  Served found;
  for (const char* version : kNativePodGroupVersions) {
    ApiReply r = api_.request("GET", std::string(kNativePodGroupsGroup) + "/" + version);
    {
      std::lock_guard lock(mu_);
      ++reads_;
    }
    if (r.kind == ApiErrorKind::kNotFound) continue;
    if (!r.ok()) {
      found = Served{"", true, r.message};
      break;
    }
    const Json doc = Json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    const Json* resources = doc.is_object() ? member(&doc, "resources") : nullptr;
    bool has = false;
    if (resources && resources->is_array()) {
      for (const Json& res : *resources) has = has || text(member(&res, "name")) == "podgroups";
    }
    if (has) {
      found = Served{version, false, ""};
      break;
    }
  }
  std::lock_guard lock(mu_);
  if (found.unknown) {
    // Keep using what was known (the server may be restarting); ask again next time.
    if (known_ && !known_->version.empty()) return *known_;
    return found;
  }
  known_ = found;
  checked_ = now();
  return found;
}

}  // namespace troupe::kube
