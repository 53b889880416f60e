// What DRA says about GPUs, kept so Troupe counts every device once: which nodes a GPU DRA
// driver serves (its ResourceSlices), which devices allocated ResourceClaims took and for
// which pods (status.allocation, status.reservedFor), and which pods on those nodes hold GPUs
// before their claim's allocation is seen (a provisional count).
//
// The rules (docs/dra.md):
//   - a node's devices are the union of the GPU drivers' devices in slices naming it
//     (spec.nodeName), keyed by driver/pool/device; devices of other drivers are ignored;
//   - an allocated claim takes the devices of its allocation that some slice publishes, each
//     device once (a device in two claims counts for the first, by claim uid);
//   - those devices are attributed to one holder: the smallest uid in status.reservedFor whose
//     pod is not known deleted, or "dra-claim/<uid>" when nothing reserves it; a claim whose
//     reserving pods are all deleted holds nothing (without kube-controller-manager nobody
//     deallocates it, and kube-scheduler would still count it: see docs/dra.md);
//   - a pod reserved by a live allocated claim is counted through its claims only; a pod bound
//     to a node that no such claim serves holds `gpus` provisionally (its nvidia.com/gpu
//     request, or what its claims ask for), which the claim replaces once it is seen.
// Pure bookkeeping, no I/O and no locking: ClusterSync owns one and guards it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace troupe::kube {

struct DraDevice {
  std::string name;
  std::string product;     // attribute productName, "" if absent
  int64_t memory_mib = 0;  // capacity memory, 0 if absent
};

struct DraSliceFacts {
  std::string node;    // spec.nodeName ("" for slices not tied to one node: ignored)
  std::string driver;  // spec.driver
  std::string pool;    // spec.pool.name
  std::vector<DraDevice> devices;
};

struct DraDeviceRef {
  std::string driver, pool, device;
};

struct DraClaimFacts {
  std::string uid;
  std::string ns, name;
  std::vector<DraDeviceRef> allocated;    // status.allocation.devices.results; empty = not allocated
  std::vector<std::string> reserved_for;  // pod uids in status.reservedFor
  int requested_gpus = 0;                 // what its spec asks of GPU device classes
};

struct DraPod {
  std::string node;  // spec.nodeName ("" = not bound: holds nothing provisionally)
  std::string key;   // namespace/name
  std::string gang;
  int gpus = 0;                     // its nvidia.com/gpu request (0 for a claim-only pod)
  std::vector<std::string> claims;  // names of the ResourceClaims its spec and status name
};

class DraLedger {
 public:
  explicit DraLedger(std::vector<std::string> gpu_drivers = {"gpu.nvidia.com"});

  bool isGpuDriver(const std::string& driver) const;
  const std::vector<std::string>& gpuDrivers() const { return drivers_; }

  void setSlice(const std::string& name, DraSliceFacts slice);
  void removeSlice(const std::string& name);
  void clearSlices();
  // The node a GPU slice publishes devices for, "" when the slice is unknown (or not a GPU one).
  std::string sliceNode(const std::string& name) const;

  struct NodeDevices {
    std::string driver;  // "" = no GPU driver publishes devices for it
    int devices = 0;
    std::string product;
    int64_t memory_mib = 0;
  };
  NodeDevices nodeDevices(const std::string& node) const;
  // Nodes some slice publishes GPU devices for.
  std::set<std::string> nodes() const;

  void setClaim(DraClaimFacts claim);
  void removeClaim(const std::string& uid);
  void clearClaims();
  // The GPUs the named claim's spec asks for; -1 when the claim is not known.
  int requestedGpus(const std::string& ns, const std::string& name) const;

  // A pod as last seen (bound or not); removePod when it is deleted, which frees what the
  // claims reserved for it alone held.
  void setPod(const std::string& uid, DraPod pod);
  // True when that may change the holdings (the pod was known, or a claim is reserved for it).
  bool removePod(const std::string& uid);
  bool knowsPod(const std::string& uid) const { return pods_.count(uid) > 0; }

  struct Holding {
    std::string node;
    int gpus = 0;
    std::string key;  // pod namespace/name (or the claim's) for messages
    std::string gang;
    bool provisional = false;
  };
  // What each holder holds on the nodes `dra_node` accepts (those DRA serves).
  std::map<std::string, Holding> holdings(const std::function<bool(const std::string&)>& dra_node) const;
  // Every counted device ("driver/pool/device") and its holder, for tests and debugging.
  std::map<std::string, std::string> deviceHolders() const;

 private:
  struct DeviceAt {
    std::string node;
    std::string slice;
    const DraDevice* device;  // inside slices_[slice]
  };
  struct ClaimRecord {
    DraClaimFacts facts;
  };
  void addDevices(const std::string& slice_name, const DraSliceFacts& slice);
  static std::string deviceKey(const std::string& driver, const std::string& pool, const std::string& device);
  // The claim's holder, "" when it holds nothing (not allocated, or its pods are gone).
  std::string holderOf(const DraClaimFacts& claim) const;

  std::vector<std::string> drivers_;
  std::map<std::string, DraSliceFacts> slices_;     // slice name -> its GPU devices
  std::map<std::string, DeviceAt> devices_;         // device key -> where it is
  std::map<std::string, ClaimRecord> claims_;       // claim uid -> claim
  std::map<std::string, std::string> claim_names_;  // ns/name -> uid
  std::map<std::string, DraPod> pods_;              // pod uid -> pod
  // Recently deleted pods (at most kGoneKept): a claim reserved for them holds nothing, even
  // when its event arrives after the pod's deletion. The claim controller drops them from
  // reservedFor soon after, so older ones need not be remembered.
  static constexpr size_t kGoneKept = 4096;
  std::set<std::string> gone_;
  std::deque<std::string> gone_order_;
};

}  // namespace troupe::kube
