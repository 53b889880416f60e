// Intra-node GPU topology: how each pair of a node's GPUs is connected, and what that is worth.
//
// A GpuTopology is a symmetric matrix of links. Each link has a kind (the `nvidia-smi topo -m`
// levels: NVSwitch, NV#, PIX, PXB, PHB, NODE, SYS) and an effective bandwidth in GB/s per
// direction, which is what placement compares: an all-reduce runs at the speed of the slowest
// link of its ring, so a GPU set is worth its bottleneck bandwidth.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/common/status.h"

namespace troupe::model {

enum class LinkKind : uint8_t {
  kSelf,
  kNVSwitch,     // any-to-any through NVSwitch chips (HGX/DGX A100, H100, H200, B200)
  kNVLink,       // direct NVLink, `nvlinks` links bonded (DGX-1 cube mesh, NVLink bridges)
  kPcieSwitch,   // PIX: behind one PCIe switch
  kPcieMulti,    // PXB: several PCIe switches, no host bridge
  kHostBridge,   // PHB: through the CPU's PCIe host bridge
  kSameNuma,     // NODE: across host bridges within one NUMA node
  kCrossSocket,  // SYS: across the CPU interconnect (UPI/xGMI)
};

const char* linkKindName(LinkKind kind);
// Parses the names linkKindName() returns, plus the nvidia-smi spellings (NV#, PIX, PXB, PHB,
// NODE, SYS). For "NV12" sets *nvlinks to 12.
Result<LinkKind> parseLinkKind(std::string_view text, int* nvlinks);

struct Link {
  LinkKind kind = LinkKind::kCrossSocket;
  int nvlinks = 0;         // bonded NVLinks for kNVLink/kNVSwitch, else 0
  double bandwidth = 0.0;  // GB/s per direction
};

class GpuTopology {
 public:
  GpuTopology() = default;
  // All pairs start as kCrossSocket at `default_bandwidth`.
  GpuTopology(int gpus, std::string profile, double default_bandwidth);

  int size() const { return size_; }
  const std::string& profile() const { return profile_; }
  const Link& link(int a, int b) const { return links_[static_cast<size_t>(a * size_ + b)]; }
  void setLink(int a, int b, Link link);
  int numa(int gpu) const { return numa_.empty() ? 0 : numa_[static_cast<size_t>(gpu)]; }
  void setNuma(int gpu, int numa_node);

  // True when the pair is joined by NVLink or NVSwitch.
  bool nvlinked(int a, int b) const;
  // Connected components of the NVLink/NVSwitch graph, as bit masks, largest first. A node
  // without NVLink has one domain per GPU.
  const std::vector<uint64_t>& nvlinkDomains() const { return domains_; }
  // The domain mask that contains `gpu`.
  uint64_t domainOf(int gpu) const;

  // Bottleneck (minimum pairwise) bandwidth of the GPUs in `mask`; for a single GPU the
  // best link of the node, so one GPU is never "worse connected" than a pair.
  double bottleneck(uint64_t mask) const;
  // Sum of pairwise bandwidths inside `mask`.
  double internalBandwidth(uint64_t mask) const;
  // Sum of bandwidths between `a` and `b` (disjoint masks).
  double cutBandwidth(uint64_t a, uint64_t b) const;
  // The best bottleneck any k GPUs of this node can have (all GPUs free). Cached per k.
  double bestBottleneck(int k) const;
  double maxBandwidth() const { return max_bandwidth_; }

  // Must be called after the last setLink(): derives domains and caches.
  void finalize();

  // Memo of GPU set choices (see gpu_selection.h); shared by copies, reset by finalize().
  struct SelectionMemo;
  SelectionMemo& memo() const { return *memo_; }

 private:
  int size_ = 0;
  std::string profile_;
  std::vector<Link> links_;
  std::vector<int> numa_;
  std::vector<uint64_t> domains_;
  std::vector<double> best_bottleneck_;  // index k
  double max_bandwidth_ = 0.0;
  std::shared_ptr<SelectionMemo> memo_;
};

// Built-in machine profiles. Names: hgx-b200-8, hgx-h200-8, hgx-h100-8, hgx-a100-8,
// dgx1-v100-8, pcie-8, pcie-4, pcie-nvbridge-8, pcie-nvbridge-4, pcie-N (any N, flat PHB).
Result<GpuTopology> makeProfile(std::string_view name, int gpus);
// The profile name that fits a GPU product label and a GPU count, e.g.
// ("NVIDIA-H100-80GB-HBM3", 8) -> "hgx-h100-8"; unknown products get a PCIe profile.
std::string profileForProduct(std::string_view product, int gpus);
// All built-in profile names (for --help and validation messages).
std::vector<std::string> builtinProfiles();

// Parses the documented JSON-free link matrix text of the node annotation
// troupe.dev/gpu-topology, already split into rows of cells, e.g.
// {{"X","NV18"},{"NV18","X"}} with optional bandwidth overrides "NV18:450".
Result<GpuTopology> topologyFromMatrix(const std::vector<std::vector<std::string>>& rows,
                                       double nvlink_link_bandwidth, double pcie_bandwidth);

}  // namespace troupe::model
