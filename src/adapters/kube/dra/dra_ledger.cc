#include "adapters/kube/dra/dra_ledger.h"

#include <algorithm>

namespace troupe::kube {

DraLedger::DraLedger(std::vector<std::string> gpu_drivers) : drivers_(std::move(gpu_drivers)) {}

bool DraLedger::isGpuDriver(const std::string& driver) const {
  return std::find(drivers_.begin(), drivers_.end(), driver) != drivers_.end();
}

std::string DraLedger::deviceKey(const std::string& driver, const std::string& pool,
                                 const std::string& device) {
  return driver + "/" + pool + "/" + device;
}

// ---- slices --------------------------------------------------------------------------------

void DraLedger::setSlice(const std::string& name, DraSliceFacts slice) {
  removeSlice(name);
  if (slice.node.empty() || !isGpuDriver(slice.driver)) return;
  addDevices(name, slices_[name] = std::move(slice));
}

void DraLedger::addDevices(const std::string& slice_name, const DraSliceFacts& slice) {
  // A device two slices publish (a pool mid-update) stays where it was first seen.
  for (const DraDevice& d : slice.devices)
    devices_.emplace(deviceKey(slice.driver, slice.pool, d.name), DeviceAt{slice.node, slice_name, &d});
}

void DraLedger::removeSlice(const std::string& name) {
  auto it = slices_.find(name);
  if (it == slices_.end()) return;
  for (auto d = devices_.begin(); d != devices_.end();) {
    d = d->second.slice == name ? devices_.erase(d) : std::next(d);
  }
  slices_.erase(it);
  // A device another slice also publishes comes back under that one.
  for (const auto& [other, s] : slices_) addDevices(other, s);
}

void DraLedger::clearSlices() {
  slices_.clear();
  devices_.clear();
}

std::string DraLedger::sliceNode(const std::string& name) const {
  auto it = slices_.find(name);
  return it == slices_.end() ? std::string() : it->second.node;
}

DraLedger::NodeDevices DraLedger::nodeDevices(const std::string& node) const {
  NodeDevices out;
  for (const auto& [key, at] : devices_) {
    if (at.node != node) continue;
    ++out.devices;
    if (out.driver.empty()) out.driver = slices_.at(at.slice).driver;
    // The node's product and memory are its first device's (the nodes Troupe models hold one
    // kind of GPU); a later device only fills what the first lacks.
    if (out.product.empty()) out.product = at.device->product;
    if (out.memory_mib == 0) out.memory_mib = at.device->memory_mib;
  }
  return out;
}

std::set<std::string> DraLedger::nodes() const {
  std::set<std::string> out;
  for (const auto& [key, at] : devices_) out.insert(at.node);
  return out;
}

// ---- claims and pods -----------------------------------------------------------------------

void DraLedger::setClaim(DraClaimFacts claim) {
  const std::string uid = claim.uid;
  if (uid.empty()) return;
  auto it = claims_.find(uid);
  if (it != claims_.end()) claim_names_.erase(it->second.facts.ns + "/" + it->second.facts.name);
  claim_names_[claim.ns + "/" + claim.name] = uid;
  claims_[uid] = ClaimRecord{std::move(claim)};
}

void DraLedger::removeClaim(const std::string& uid) {
  auto it = claims_.find(uid);
  if (it == claims_.end()) return;
  auto name = claim_names_.find(it->second.facts.ns + "/" + it->second.facts.name);
  if (name != claim_names_.end() && name->second == uid) claim_names_.erase(name);
  claims_.erase(it);
}

void DraLedger::clearClaims() {
  claims_.clear();
  claim_names_.clear();
}

int DraLedger::requestedGpus(const std::string& ns, const std::string& name) const {
  auto it = claim_names_.find(ns + "/" + name);
  if (it == claim_names_.end()) return -1;
  return claims_.at(it->second).facts.requested_gpus;
}

void DraLedger::setPod(const std::string& uid, DraPod pod) {
  if (gone_.count(uid)) return;  // a late echo of a deleted pod
  pods_[uid] = std::move(pod);
}

bool DraLedger::removePod(const std::string& uid) {
  bool affected = pods_.erase(uid) > 0;
  if (!gone_.insert(uid).second) return affected;
  gone_order_.push_back(uid);
  if (gone_order_.size() > kGoneKept) {
    gone_.erase(gone_order_.front());
    gone_order_.pop_front();
  }
  for (auto it = claims_.begin(); !affected && it != claims_.end(); ++it) {
    const auto& r = it->second.facts.reserved_for;
    affected = std::find(r.begin(), r.end(), uid) != r.end();
  }
  return affected;
}

std::string DraLedger::holderOf(const DraClaimFacts& claim) const {
  if (claim.allocated.empty()) return {};
  if (claim.reserved_for.empty()) return "dra-claim/" + claim.uid;
  std::string best;
  for (const std::string& pod : claim.reserved_for) {
    if (gone_.count(pod)) continue;
    if (best.empty() || pod < best) best = pod;
  }
  return best;  // "" when every pod it was reserved for is deleted
}

std::map<std::string, DraLedger::Holding> DraLedger::holdings(
    const std::function<bool(const std::string&)>& dra_node) const {
  std::map<std::string, Holding> out;
  std::set<std::string> taken;   // device keys counted
  std::set<std::string> served;  // pods a live allocated claim serves
  for (const auto& [cuid, c] : claims_) {
    const std::string holder = holderOf(c.facts);
    if (holder.empty()) continue;
    for (const std::string& pod : c.facts.reserved_for) served.insert(pod);
    for (const DraDeviceRef& ref : c.facts.allocated) {
      const std::string key = deviceKey(ref.driver, ref.pool, ref.device);
      auto at = devices_.find(key);
      if (at == devices_.end() || !dra_node(at->second.node) || !taken.insert(key).second) continue;
      Holding& h = out[holder];
      if (h.gpus == 0) {
        h.node = at->second.node;
        auto pod = pods_.find(holder);
        h.key = pod != pods_.end() ? pod->second.key : c.facts.ns + "/" + c.facts.name;
        h.gang = pod != pods_.end() ? pod->second.gang : std::string();
      } else if (h.node != at->second.node) {
        continue;  // one holder, one node: a claim's devices are node-local
      }
      ++h.gpus;
    }
  }
  for (const auto& [uid, pod] : pods_) {
    if (pod.node.empty() || served.count(uid) || out.count(uid) || !dra_node(pod.node)) continue;
    int gpus = pod.gpus;
    if (gpus == 0) {
      const std::string ns = pod.key.substr(0, pod.key.find('/'));
      for (const std::string& claim : pod.claims) gpus += std::max(0, requestedGpus(ns, claim));
    }
    if (gpus > 0) out[uid] = Holding{pod.node, gpus, pod.key, pod.gang, true};
  }
  return out;
}

std::map<std::string, std::string> DraLedger::deviceHolders() const {
  std::map<std::string, std::string> out;
  for (const auto& [cuid, c] : claims_) {
    const std::string holder = holderOf(c.facts);
    if (holder.empty()) continue;
    for (const DraDeviceRef& ref : c.facts.allocated) {
      const std::string key = deviceKey(ref.driver, ref.pool, ref.device);
      if (devices_.count(key)) out.emplace(key, holder);
    }
  }
  return out;
}

}  // namespace troupe::kube
