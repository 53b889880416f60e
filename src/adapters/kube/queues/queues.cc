#include "adapters/kube/queues/queues.h"

#include "adapters/common/gpu_amount.h"
#include "troupe/model/pod_contract.h"

namespace troupe::kube {
namespace {

using adapters::Json;

// What a JSON value is, for messages: the value itself, short.
std::string shown(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 64 ? s.substr(0, 61) + "..." : s;
}

// Milli-GPUs of an amount: a JSON number (2, 2.5) or a quantity string ("2.5", "500m").
Result<int64_t> amountOf(const Json& v) {
  if (v.is_string()) return adapters::parseGpuAmount(v.get_ref<const std::string&>());
  if (v.is_number()) return adapters::parseGpuAmount(v.dump());
  return invalidArgument("is " + shown(v) +
                         ": must be a number of GPUs, whole (8) or a quantity such as \"2.5\" or \"500m\"");
}

// spec.guaranteed / spec.limit: {gpus: N, products: {PRODUCT: N}}. Returns the problem with
// the field's path, or "".
std::string decodeQuota(const Json& v, const std::string& path, sched::GpuQuota* out) {
  if (v.is_null()) return "";
  if (!v.is_object()) {
    return path + " is " + shown(v) +
           ": must be an object such as {gpus: 8, products: {NVIDIA-H100-80GB-HBM3: 4}}";
  }
  for (const auto& [key, value] : v.items()) {
    if (key == "gpus") {
      if (value.is_null()) continue;
      Result<int64_t> milli = amountOf(value);
      if (!milli.isOk()) return path + ".gpus " + milli.status().message();
      out->milli = milli.value();
    } else if (key == "products") {
      if (value.is_null()) continue;
      if (!value.is_object()) {
        return path + ".products is " + shown(value) +
               ": must map GPU products (the nodes' nvidia.com/gpu.product label) to GPUs, e.g. "
               "{NVIDIA-H100-80GB-HBM3: 4}";
      }
      for (const auto& [product, amount] : value.items()) {
        Result<int64_t> milli = amountOf(amount);
        if (!milli.isOk()) return path + ".products[\"" + product + "\"] " + milli.status().message();
        out->product_milli[product] = milli.value();
      }
    } else {
      return path + "." + key + " is not a field: use gpus and products";
    }
  }
  return "";
}

std::string decodeSpec(const Json& spec, sched::QueueSpec* out) {
  if (!spec.is_object()) return "spec is " + shown(spec) + ": must be an object";
  for (const auto& [key, v] : spec.items()) {
    if (v.is_null()) continue;
    if (key == "parent") {
      if (!v.is_string())
        return "spec.parent is " + shown(v) + ": must be the name of another Queue, or absent";
      out->parent = v.get<std::string>();
    } else if (key == "weight") {
      if (!v.is_number())
        return "spec.weight is " + shown(v) + ": must be a positive number such as 1 or 2.5";
      const double w = v.get<double>();
      if (Status s = adapters::checkQueueWeight(w); !s.isOk()) return "spec.weight " + s.message();
      out->weight = w;
    } else if (key == "guaranteed" || key == "limit") {
      if (std::string p = decodeQuota(v, "spec." + key, key == "guaranteed" ? &out->guaranteed : &out->limit);
          !p.empty())
        return p;
    } else if (key == "preemptible") {
      if (!v.is_boolean()) return "spec.preemptible is " + shown(v) + ": must be true or false";
      out->preemptible = v.get<bool>();
    }
    // Other fields: a newer CRD's, which this Troupe does not know; the schema validated them.
  }
  return "";
}

}  // namespace

DecodedQueue decodeQueue(const Json& object) {
  DecodedQueue q;
  const Json* meta = adapters::field(object, "metadata");
  q.name = adapters::textOf(meta ? adapters::field(*meta, "name") : nullptr);
  if (q.name.empty()) {
    q.error = "a Queue without metadata.name: give it a name";
    return q;
  }
  q.spec.name = q.name;
  const Json* spec = adapters::field(object, "spec");
  if (spec) {
    if (std::string problem = decodeSpec(*spec, &q.spec); !problem.empty())
      q.error = "queue " + q.name + ": " + problem;
  }
  return q;
}

Result<NamespaceQueue> decodeNamespace(const Json& object) {
  const Json* meta = adapters::field(object, "metadata");
  NamespaceQueue out;
  out.ns = adapters::textOf(meta ? adapters::field(*meta, "name") : nullptr);
  if (out.ns.empty()) return invalidArgument("a Namespace without metadata.name");
  const Json* annotations = meta ? adapters::field(*meta, "annotations") : nullptr;
  if (annotations && annotations->is_object()) {
    // Annotation keys are case-sensitive: an exact match only.
    if (auto it = annotations->find(sched::kNamespaceDefaultQueue); it != annotations->end())
      out.queue = adapters::textOf(&*it);
  }
  return out;
}

sched::QueueTree buildQueueTree(const std::vector<DecodedQueue>& queues, const std::string& default_queue) {
  std::vector<sched::QueueSpec> specs;
  std::map<std::string, std::string> undecodable;
  for (const DecodedQueue& q : queues) {
    if (q.name.empty()) continue;  // nothing can name it
    if (q.error.empty()) {
      specs.push_back(q.spec);
    } else {
      undecodable[q.name] = q.error;
    }
  }
  return sched::QueueTree::build(std::move(specs), std::move(undecodable), default_queue);
}

}  // namespace troupe::kube
