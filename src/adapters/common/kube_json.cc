#include "adapters/common/kube_json.h"

#include <cstdint>
#include <limits>

#include "troupe/common/strings.h"
#include "troupe/model/pod_contract.h"

namespace troupe::adapters {
namespace {

Status badRequest(const std::string& what) { return invalidArgument(what); }

sched::StringMap stringMap(const Json* v) {
  sched::StringMap out;
  if (!v || !v->is_object()) return out;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (it.value().is_string()) out.emplace(it.key(), it.value().get<std::string>());
  }
  return out;
}

// metadata.labels and metadata.annotations, which pods and nodes carry alike.
template <class Facts>
void readLabels(const Json& meta, Facts& out) {
  out.labels = stringMap(field(meta, "labels"));
  out.annotations = stringMap(field(meta, "annotations"));
}

// The object's metadata, or the error for an object that is not one (`not_object`) or has
// none (`no_metadata`).
Result<const Json*> metadataOf(const Json& object, const char* not_object, const char* no_metadata) {
  if (!object.is_object()) return badRequest(not_object);
  const Json* meta = field(object, "metadata");
  if (!meta || !meta->is_object()) return badRequest(no_metadata);
  return meta;
}

Result<sched::ContainerResources> containerFromJson(const Json& c, const std::string& where) {
  sched::ContainerResources out;
  if (!c.is_object()) return badRequest(where + " must be an object");
  if (const Json* res = field(c, "resources"); res && res->is_object()) {
    for (const char* kind : {"requests", "limits"}) {
      const Json* m = field(*res, kind);
      if (!m || m->is_null()) continue;
      if (!m->is_object()) return badRequest(where + ".resources." + kind + " must be an object");
      auto& target = std::string(kind) == "requests" ? out.requests : out.limits;
      for (auto it = m->begin(); it != m->end(); ++it) {
        std::string q = quantityText(&it.value());
        if (q.empty()) {
          return badRequest(where + ".resources." + kind + "[\"" + it.key() +
                            "\"] must be a quantity string such as \"4\"");
        }
        target.emplace(it.key(), q);
      }
    }
  }
  out.restartable_init = textOf(field(c, "restartPolicy")) == "Always";
  return out;
}

}  // namespace

const Json* field(const Json& object, std::string_view name) {
  if (!object.is_object()) return nullptr;
  if (auto it = object.find(name); it != object.end()) return &*it;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (equalsIgnoreCase(it.key(), name)) return &it.value();
  }
  return nullptr;
}

std::string textOf(const Json* v) { return v && v->is_string() ? v->get<std::string>() : std::string(); }

std::string quantityText(const Json* v) {
  if (!v) return {};
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number_unsigned()) return std::to_string(v->get<uint64_t>());
  if (v->is_number_integer()) return std::to_string(v->get<int64_t>());
  if (v->is_number()) return v->dump();
  return {};
}

Result<sched::PodFacts> podFromJson(const Json& pod) {
  sched::PodFacts out;
  Result<const Json*> found = metadataOf(pod, "Pod must be a v1.Pod object", "Pod.metadata is missing");
  if (!found.isOk()) return found.status();
  const Json* meta = found.value();
  out.name = textOf(field(*meta, "name"));
  out.ns = textOf(field(*meta, "namespace"));
  out.uid = textOf(field(*meta, "uid"));
  readLabels(*meta, out);
  if (out.name.empty()) return badRequest("Pod.metadata.name is missing");
  if (out.ns.empty()) out.ns = "default";
  if (const Json* spec = field(pod, "spec"); spec && spec->is_object()) {
    for (const char* list : {"containers", "initContainers"}) {
      const Json* cs = field(*spec, list);
      if (!cs || cs->is_null()) continue;
      if (!cs->is_array()) return badRequest(std::string("Pod.spec.") + list + " must be an array");
      for (size_t i = 0; i < cs->size(); ++i) {
        Result<sched::ContainerResources> c =
            containerFromJson((*cs)[i], std::string("Pod.spec.") + list + "[" + std::to_string(i) + "]");
        if (!c.isOk()) return c.status();
        (std::string(list) == "containers" ? out.containers : out.init_containers).push_back(c.value());
      }
    }
    if (const Json* p = field(*spec, "priority"); p && p->is_number_integer()) {
      // Kubernetes' priority is an int32; anything that does not fit int64 is refused, not wrapped.
      if (p->is_number_unsigned() &&
          p->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return badRequest("Pod.spec.priority " + p->dump() + " is out of range (a 32-bit integer)");
      }
      out.priority = p->get<int64_t>();
    }
    out.node_name = textOf(field(*spec, "nodeName"));
    if (const Json* group = field(*spec, "schedulingGroup"); group && group->is_object())
      out.scheduling_group = textOf(field(*group, "podGroupName"));
    if (const Json* gates = field(*spec, "schedulingGates"); gates && gates->is_array()) {
      for (const Json& gate : *gates) {
        std::string name = textOf(field(gate, "name"));
        if (!name.empty()) out.scheduling_gates.push_back(std::move(name));
      }
    }
    if (const Json* selector = field(*spec, "nodeSelector"); selector && selector->is_object()) {
      for (auto it = selector->begin(); it != selector->end(); ++it) {
        if (it.value().is_string()) out.node_selector[it.key()] = it.value().get<std::string>();
      }
    }
    if (const Json* claims = field(*spec, "resourceClaims"); claims && claims->is_array()) {
      for (const Json& claim : *claims) {
        sched::PodClaim c;
        c.name = textOf(field(claim, "name"));
        c.claim_name = textOf(field(claim, "resourceClaimName"));
        c.template_name = textOf(field(claim, "resourceClaimTemplateName"));
        if (!c.name.empty()) out.resource_claims.push_back(std::move(c));
      }
    }
  }
  if (const Json* status = field(pod, "status"); status && status->is_object()) {
    out.phase = textOf(field(*status, "phase"));
    // Claims made from templates: their generated names.
    if (const Json* made = field(*status, "resourceClaimStatuses"); made && made->is_array()) {
      for (const Json& entry : *made) {
        const std::string name = textOf(field(entry, "name"));
        const std::string claim = textOf(field(entry, "resourceClaimName"));
        for (sched::PodClaim& c : out.resource_claims) {
          if (c.name == name && c.claim_name.empty()) c.claim_name = claim;
        }
      }
    }
    if (const Json* ext = field(*status, "extendedResourceClaimStatus"); ext && ext->is_object())
      out.extended_resource_claim = textOf(field(*ext, "resourceClaimName"));
  }
  return out;
}

Result<model::NodeFacts> nodeFromJson(const Json& node) {
  Result<const Json*> found = metadataOf(node, "each node must be a v1.Node object", "node without metadata");
  if (!found.isOk()) return found.status();
  const Json& meta = *found.value();
  model::NodeFacts out;
  out.name = textOf(field(meta, "name"));
  if (out.name.empty()) return badRequest("node without metadata.name");
  readLabels(meta, out);
  if (const Json* spec = field(node, "spec"); spec && spec->is_object()) {
    if (const Json* u = field(*spec, "unschedulable"); u && u->is_boolean())
      out.unschedulable = u->get<bool>();
  }
  if (const Json* status = field(node, "status"); status && status->is_object()) {
    const Json* alloc = field(*status, "allocatable");
    const Json* cap = field(*status, "capacity");
    auto pick = [&](const char* key) {
      std::string v = alloc ? quantityText(field(*alloc, key)) : std::string();
      if (v.empty() && cap) v = quantityText(field(*cap, key));
      return v;
    };
    out.allocatable_gpus = pick(model::kGpuResource);
    // CPU, memory and pods stay with kube-scheduler in the live path; not tracked here.
  }
  return out;
}

}  // namespace troupe::adapters
