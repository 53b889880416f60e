#include "adapters/kube/dra/dra_objects.h"

#include <algorithm>

#include "troupe/common/quantity.h"

namespace troupe::kube {
namespace {

using adapters::field;
using adapters::quantityText;
using adapters::textOf;

bool isGpuClass(const std::string& name, const std::vector<std::string>& classes) {
  return std::find(classes.begin(), classes.end(), name) != classes.end();
}

// One exactly (or firstAvailable alternative) request's GPUs: 0 for another class.
int gpusOfRequest(const Json& request, const std::vector<std::string>& classes) {
  if (!isGpuClass(textOf(field(request, "deviceClassName")), classes)) return 0;
  if (textOf(field(request, "allocationMode")) == "All") return 1;
  const Json* count = field(request, "count");
  if (count && count->is_number_integer() && count->get<int64_t>() > 0)
    return static_cast<int>(std::min<int64_t>(count->get<int64_t>(), 64));
  return 1;
}

}  // namespace

Result<std::pair<std::string, DraSliceFacts>> decodeResourceSlice(const Json& slice) {
  const Json* meta = field(slice, "metadata");
  const std::string name = meta ? textOf(field(*meta, "name")) : std::string();
  if (name.empty()) return invalidArgument("ResourceSlice without metadata.name");
  const Json* spec = field(slice, "spec");
  if (!spec || !spec->is_object()) return invalidArgument("ResourceSlice " + name + ": spec is missing");
  DraSliceFacts out;
  out.driver = textOf(field(*spec, "driver"));
  out.node = textOf(field(*spec, "nodeName"));
  if (const Json* pool = field(*spec, "pool"); pool && pool->is_object())
    out.pool = textOf(field(*pool, "name"));
  const Json* devices = field(*spec, "devices");
  if (devices && !devices->is_null() && !devices->is_array())
    return invalidArgument("ResourceSlice " + name + ": spec.devices must be an array");
  if (devices && devices->is_array()) {
    for (const Json& d : *devices) {
      DraDevice dev;
      dev.name = textOf(field(d, "name"));
      if (dev.name.empty()) continue;
      if (const Json* attrs = field(d, "attributes"); attrs && attrs->is_object()) {
        if (const Json* product = field(*attrs, "productName"); product && product->is_object())
          dev.product = textOf(field(*product, "string"));
      }
      if (const Json* cap = field(d, "capacity"); cap && cap->is_object()) {
        if (const Json* memory = field(*cap, "memory"); memory && memory->is_object()) {
          Result<int64_t> bytes = parseQuantityValue(quantityText(field(*memory, "value")));
          if (bytes.isOk() && bytes.value() > 0) dev.memory_mib = bytes.value() >> 20;
        }
      }
      out.devices.push_back(std::move(dev));
    }
  }
  return std::make_pair(name, std::move(out));
}

int requestedGpusOf(const Json& claim_spec, const std::vector<std::string>& gpu_classes) {
  const Json* devices = field(claim_spec, "devices");
  const Json* requests = devices ? field(*devices, "requests") : nullptr;
  if (!requests || !requests->is_array()) return 0;
  int gpus = 0;
  for (const Json& r : *requests) {
    if (const Json* exactly = field(r, "exactly"); exactly && exactly->is_object()) {
      gpus += gpusOfRequest(*exactly, gpu_classes);
    } else if (const Json* first = field(r, "firstAvailable");
               first && first->is_array() && !first->empty()) {
      gpus += gpusOfRequest(first->front(), gpu_classes);
    }
  }
  return std::min(gpus, 64);
}

Result<DraClaimFacts> decodeResourceClaim(const Json& claim, const std::vector<std::string>& gpu_classes) {
  const Json* meta = field(claim, "metadata");
  if (!meta || !meta->is_object()) return invalidArgument("ResourceClaim without metadata");
  DraClaimFacts out;
  out.uid = textOf(field(*meta, "uid"));
  out.name = textOf(field(*meta, "name"));
  out.ns = textOf(field(*meta, "namespace"));
  if (out.uid.empty() || out.name.empty())
    return invalidArgument("ResourceClaim without metadata.uid or metadata.name");
  if (const Json* spec = field(claim, "spec"); spec && spec->is_object())
    out.requested_gpus = requestedGpusOf(*spec, gpu_classes);
  const Json* status = field(claim, "status");
  if (!status || !status->is_object()) return out;
  if (const Json* alloc = field(*status, "allocation"); alloc && alloc->is_object()) {
    const Json* devices = field(*alloc, "devices");
    const Json* results = devices ? field(*devices, "results") : nullptr;
    if (results && results->is_array()) {
      for (const Json& r : *results) {
        DraDeviceRef ref{textOf(field(r, "driver")), textOf(field(r, "pool")), textOf(field(r, "device"))};
        if (!ref.driver.empty() && !ref.device.empty()) out.allocated.push_back(std::move(ref));
      }
    }
  }
  if (const Json* reserved = field(*status, "reservedFor"); reserved && reserved->is_array()) {
    for (const Json& r : *reserved) {
      // Pods, or (with DRAWorkloadResourceClaims) a PodGroup: held under its uid either way.
      std::string uid = textOf(field(r, "uid"));
      if (!uid.empty()) out.reserved_for.push_back(std::move(uid));
    }
  }
  return out;
}

}  // namespace troupe::kube
