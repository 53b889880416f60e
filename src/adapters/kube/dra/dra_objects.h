// ResourceSlices, ResourceClaims and ResourceClaimTemplates (resource.k8s.io/v1) decoded into
// what the DRA ledger keeps: the GPU devices a slice publishes for a node, the devices a claim
// was allocated and the pods it is reserved for, and how many GPUs a claim's spec asks for.
#pragma once

#include <string>
#include <vector>

#include "adapters/kube/dra/dra_ledger.h"
#include "adapters/kube/watch/kube_objects.h"
#include "troupe/common/status.h"

namespace troupe::kube {

inline constexpr const char* kResourceSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";
inline constexpr const char* kResourceClaimsPath = "/apis/resource.k8s.io/v1/resourceclaims";

// A ResourceSlice's name and GPU facts (every device, whatever its driver: the ledger drops
// other drivers'). The product is the device attribute productName, the memory its capacity
// "memory" (bytes, rounded down to MiB). Errors name the field.
Result<std::pair<std::string, DraSliceFacts>> decodeResourceSlice(const Json& slice);

// The GPUs a claim spec (ResourceClaim.spec, or ResourceClaimTemplate.spec.spec) asks of the
// device classes in `gpu_classes`: exactly requests with allocationMode ExactCount (count,
// default 1) or All (counted as 1: the node decides how many), and the first alternative of a
// firstAvailable request.
int requestedGpusOf(const Json& claim_spec, const std::vector<std::string>& gpu_classes);

// A ResourceClaim: its uid, namespace/name, the allocated devices and the pods in
// status.reservedFor.
Result<DraClaimFacts> decodeResourceClaim(const Json& claim, const std::vector<std::string>& gpu_classes);

}  // namespace troupe::kube
