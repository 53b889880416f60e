// Fuzz targets of what Troupe reads from the Kubernetes side: API server JSON (list pages and
// watch events of pods, nodes, ResourceSlices and ResourceClaims, as the watch threads decode them) and
// kubeconfig files.
#include "adapters/kube/client/kube_config.h"
#include "adapters/kube/dra/dra_objects.h"
#include "adapters/kube/watch/kube_objects.h"
#include "fuzz_support.h"
#include "fuzz_targets.h"

namespace troupe::fuzz {
namespace {

// What a watch thread does with one object: decode it as a node and as a pod, apply the node.
void applyObject(sched::Scheduler& s, const kube::Json& object) {
  if (Result<model::NodeFacts> node = kube::decodeNode(object); node.isOk()) {
    (void)s.upsertNode(node.value());  // an error is fine (it is logged); a throw is not (C1)
  }
  if (Result<kube::PodView> pod = kube::decodePod(object); pod.isOk()) {
    const kube::PodView& v = pod.value();
    FUZZ_CHECK(v.gpus >= 0 && v.gpus <= 64, "kube_objects",
               "a pod counted as " + std::to_string(v.gpus) + " GPUs");
    for (int g : v.assigned)
      FUZZ_CHECK(g >= 0 && g < 64, "kube_objects", "an assigned GPU index out of range");
  }
  // The DRA watches' objects (docs/dra.md): decoded or refused, never a throw.
  (void)kube::decodeResourceSlice(object);
  if (Result<kube::DraClaimFacts> claim = kube::decodeResourceClaim(object, {"gpu.nvidia.com"});
      claim.isOk()) {
    const int gpus = claim.value().requested_gpus;
    FUZZ_CHECK(gpus >= 0 && gpus <= 64, "kube_objects",
               "a claim counted as " + std::to_string(gpus) + " GPUs");
  }
}

}  // namespace

int kubeObjects(const uint8_t* data, size_t size) {
  Result<kube::Json> doc = kube::parseKubeJson(asText(data, size));
  if (!doc.isOk()) return 0;
  std::unique_ptr<sched::Scheduler> s = fleet();
  const kube::Json& d = doc.value();
  if (!d.is_object()) return 0;
  if (auto items = d.find("items"); items != d.end() && items->is_array()) {
    for (const kube::Json& item : *items) applyObject(*s, item);  // a list page
  } else if (auto object = d.find("object"); object != d.end()) {
    applyObject(*s, *object);  // a watch event
  } else {
    applyObject(*s, d);
  }
  (void)kube::resourceVersionOf(d);
  return 0;
}

int kubeconfig(const uint8_t* data, size_t size) {
  const std::string text(asText(data, size));
  // Files named by the input resolve under a folder that does not exist.
  Result<kube::ClusterEndpoint> ep =
      kube::parseKubeconfig(text, "fuzz.kubeconfig", "/nonexistent/troupe-fuzz");
  if (ep.isOk()) {
    FUZZ_CHECK(ep.value().server.rfind("https://", 0) == 0 || ep.value().server.rfind("http://", 0) == 0,
               "kubeconfig", "a server that is not an http(s) URL: " + ep.value().server);
  }
  // Base64 (the -data fields): what decodes re-encodes and decodes to the same bytes.
  Result<std::string> bytes = kube::decodeBase64(text);
  if (bytes.isOk()) {
    Result<std::string> again = kube::decodeBase64(kube::encodeBase64(bytes.value()));
    FUZZ_CHECK(again.isOk() && again.value() == bytes.value(), "kubeconfig", "base64 does not round-trip");
  }
  return 0;
}

}  // namespace troupe::fuzz
