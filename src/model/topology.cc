#include "troupe/model/topology.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "troupe/common/strings.h"
#include "troupe/model/gpu_selection.h"

namespace troupe::model {
namespace {

// Effective GB/s per direction, rounded from the figures in docs/topology.md.
constexpr double kPcieGen4 = 32.0;
constexpr double kPcieGen3 = 16.0;
constexpr double kNvlink2PerLink = 25.0;  // V100
constexpr double kNvBridge = 100.0;       // 2-way NVLink bridge on PCIe cards
// The largest bandwidth a link cell may name: far above any real link (NVLink 5 is 1,800 GB/s),
// low enough that sums over a 64-GPU matrix stay exact.
constexpr double kMaxCellBandwidth = 1e6;

struct LinkName {
  LinkKind kind;
  const char* name;
};
constexpr LinkName kLinkNames[] = {
    {LinkKind::kSelf, "X"},         {LinkKind::kNVSwitch, "NVS"},    {LinkKind::kNVLink, "NV"},
    {LinkKind::kPcieSwitch, "PIX"}, {LinkKind::kPcieMulti, "PXB"},   {LinkKind::kHostBridge, "PHB"},
    {LinkKind::kSameNuma, "NODE"},  {LinkKind::kCrossSocket, "SYS"},
};

// Bandwidth of a PCIe-level link relative to a direct PCIe switch path.
double pcieBandwidth(LinkKind kind, double pcie) {
  switch (kind) {
    case LinkKind::kPcieSwitch: return pcie;
    case LinkKind::kPcieMulti: return pcie * 0.75;
    case LinkKind::kHostBridge: return pcie * 0.6;
    case LinkKind::kSameNuma: return pcie * 0.5;
    case LinkKind::kCrossSocket: return pcie * 0.35;
    default: return pcie;
  }
}

Link pcieLink(LinkKind kind, double pcie) { return Link{kind, 0, pcieBandwidth(kind, pcie)}; }

GpuTopology nvswitchProfile(std::string name, int gpus, int links, double bandwidth, double pcie) {
  GpuTopology t(gpus, std::move(name), pcieBandwidth(LinkKind::kCrossSocket, pcie));
  for (int a = 0; a < gpus; ++a) {
    t.setNuma(a, a < gpus / 2 ? 0 : 1);
    for (int b = a + 1; b < gpus; ++b) t.setLink(a, b, Link{LinkKind::kNVSwitch, links, bandwidth});
  }
  t.finalize();
  return t;
}

// PCIe server: GPUs in pairs behind a switch; pairs on one socket meet at the host bridge
// (or NUMA node); the two halves of the box are on different sockets.
GpuTopology pcieProfile(std::string name, int gpus, double pcie, bool nvbridge) {
  GpuTopology t(gpus, std::move(name), pcieBandwidth(LinkKind::kCrossSocket, pcie));
  const int half = gpus >= 8 ? gpus / 2 : gpus;  // 4-GPU boxes: one socket
  for (int a = 0; a < gpus; ++a) {
    t.setNuma(a, a / half);
    for (int b = a + 1; b < gpus; ++b) {
      if (a / 2 == b / 2) {
        t.setLink(a, b,
                  nvbridge ? Link{LinkKind::kNVLink, 4, kNvBridge} : pcieLink(LinkKind::kPcieSwitch, pcie));
      } else if (a / half == b / half) {
        t.setLink(a, b, pcieLink(gpus >= 8 ? LinkKind::kHostBridge : LinkKind::kSameNuma, pcie));
      } else {
        t.setLink(a, b, pcieLink(LinkKind::kCrossSocket, pcie));
      }
    }
  }
  t.finalize();
  return t;
}

// DGX-1 with V100: the hybrid cube mesh. Pairs with two NVLinks, pairs with one, the rest
// reach each other over PCIe (switch pairs 0-1/2-3/4-5/6-7, host bridge within a socket,
// the CPU interconnect across).
GpuTopology dgx1Profile() {
  GpuTopology t(8, "dgx1-v100-8", pcieBandwidth(LinkKind::kCrossSocket, kPcieGen3));
  for (int a = 0; a < 8; ++a) {
    t.setNuma(a, a / 4);
    for (int b = a + 1; b < 8; ++b) {
      LinkKind kind = a / 2 == b / 2   ? LinkKind::kPcieSwitch
                      : a / 4 == b / 4 ? LinkKind::kHostBridge
                                       : LinkKind::kCrossSocket;
      t.setLink(a, b, pcieLink(kind, kPcieGen3));
    }
  }
  const int two[][2] = {{0, 3}, {0, 4}, {1, 2}, {1, 5}, {2, 3}, {4, 7}, {5, 6}, {6, 7}};
  const int one[][2] = {{0, 1}, {0, 2}, {1, 3}, {2, 6}, {3, 7}, {4, 5}, {4, 6}, {5, 7}};
  for (const auto& p : two) t.setLink(p[0], p[1], Link{LinkKind::kNVLink, 2, 2 * kNvlink2PerLink});
  for (const auto& p : one) t.setLink(p[0], p[1], Link{LinkKind::kNVLink, 1, kNvlink2PerLink});
  t.finalize();
  return t;
}

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const char* linkKindName(LinkKind kind) {
  for (const LinkName& n : kLinkNames) {
    if (n.kind == kind) return n.name;
  }
  return "?";
}

Result<LinkKind> parseLinkKind(std::string_view text, int* nvlinks) {
  std::string t = upper(text);
  *nvlinks = 0;
  if (t == "NVS" || t == "NVSWITCH") return LinkKind::kNVSwitch;
  if (t.size() > 2 && t.rfind("NV", 0) == 0) {
    const std::string_view digits = std::string_view(t).substr(2);
    if (std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      // Node-controlled text: digits that do not fit an int are an error, never an exception.
      int links = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), links);
      if (ec == std::errc() && end == digits.data() + digits.size() && links > 0 && links <= 64) {
        *nvlinks = links;
        return LinkKind::kNVLink;
      }
      return invalidArgument("link \"" + std::string(text) +
                             "\": NV<links> takes 1 to 64 bonded NVLinks, not " + std::string(digits));
    }
  }
  for (const LinkName& n : kLinkNames) {
    if (t == n.name && n.kind != LinkKind::kNVLink) return n.kind;
  }
  return invalidArgument("link \"" + std::string(text) +
                         "\" is not one of X, NVS, NV<links>, PIX, PXB, PHB, NODE, SYS");
}

GpuTopology::GpuTopology(int gpus, std::string profile, double default_bandwidth)
    : size_(gpus),
      profile_(std::move(profile)),
      links_(static_cast<size_t>(gpus * gpus), Link{LinkKind::kCrossSocket, 0, default_bandwidth}),
      numa_(static_cast<size_t>(gpus), 0) {
  for (int i = 0; i < gpus; ++i) links_[static_cast<size_t>(i * gpus + i)] = Link{LinkKind::kSelf, 0, 0};
}

void GpuTopology::setLink(int a, int b, Link link) {
  links_[static_cast<size_t>(a * size_ + b)] = link;
  links_[static_cast<size_t>(b * size_ + a)] = link;
}

void GpuTopology::setNuma(int gpu, int numa_node) { numa_[static_cast<size_t>(gpu)] = numa_node; }

bool GpuTopology::nvlinked(int a, int b) const {
  LinkKind k = link(a, b).kind;
  return k == LinkKind::kNVLink || k == LinkKind::kNVSwitch;
}

uint64_t GpuTopology::domainOf(int gpu) const {
  for (uint64_t d : domains_) {
    if (d & (uint64_t{1} << gpu)) return d;
  }
  return uint64_t{1} << gpu;
}

double GpuTopology::bottleneck(uint64_t mask) const {
  if (std::popcount(mask) <= 1) return max_bandwidth_;
  double worst = 1e300;
  for (int a = 0; a < size_; ++a) {
    if (!(mask >> a & 1)) continue;
    for (int b = a + 1; b < size_; ++b) {
      if (mask >> b & 1) worst = std::min(worst, link(a, b).bandwidth);
    }
  }
  return worst;
}

double GpuTopology::internalBandwidth(uint64_t mask) const {
  double sum = 0;
  for (int a = 0; a < size_; ++a) {
    if (!(mask >> a & 1)) continue;
    for (int b = a + 1; b < size_; ++b) {
      if (mask >> b & 1) sum += link(a, b).bandwidth;
    }
  }
  return sum;
}

double GpuTopology::cutBandwidth(uint64_t a_mask, uint64_t b_mask) const {
  double sum = 0;
  for (int a = 0; a < size_; ++a) {
    if (!(a_mask >> a & 1)) continue;
    for (int b = 0; b < size_; ++b) {
      if (b_mask >> b & 1) sum += link(a, b).bandwidth;
    }
  }
  return sum;
}

double GpuTopology::bestBottleneck(int k) const {
  if (k <= 0 || k > size_) return 0.0;
  return best_bottleneck_[static_cast<size_t>(k)];
}

void GpuTopology::finalize() {
  memo_ = newSelectionMemo();
  max_bandwidth_ = 0.0;
  for (int a = 0; a < size_; ++a) {
    for (int b = a + 1; b < size_; ++b) max_bandwidth_ = std::max(max_bandwidth_, link(a, b).bandwidth);
  }
  // NVLink connected components.
  domains_.clear();
  uint64_t seen = 0;
  for (int start = 0; start < size_; ++start) {
    if (seen >> start & 1) continue;
    uint64_t comp = uint64_t{1} << start;
    bool grew = true;
    while (grew) {
      grew = false;
      for (int a = 0; a < size_; ++a) {
        if (!(comp >> a & 1)) continue;
        for (int b = 0; b < size_; ++b) {
          if (!(comp >> b & 1) && nvlinked(a, b)) {
            comp |= uint64_t{1} << b;
            grew = true;
          }
        }
      }
    }
    seen |= comp;
    domains_.push_back(comp);
  }
  std::stable_sort(domains_.begin(), domains_.end(),
                   [](uint64_t x, uint64_t y) { return std::popcount(x) > std::popcount(y); });
  // Best bottleneck per size, by exhaustive search where it is cheap, greedy growth otherwise.
  best_bottleneck_.assign(static_cast<size_t>(size_ + 1), 0.0);
  const uint64_t all = size_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << size_) - 1;
  if (size_ <= 16) {
    for (uint64_t m = 1; m <= all; ++m) {
      size_t k = static_cast<size_t>(std::popcount(m));
      best_bottleneck_[k] = std::max(best_bottleneck_[k], bottleneck(m));
    }
  } else {
    for (int k = 1; k <= size_; ++k) best_bottleneck_[static_cast<size_t>(k)] = bottleneck(all);
    best_bottleneck_[1] = max_bandwidth_;
  }
}

Result<GpuTopology> makeProfile(std::string_view name, int gpus) {
  if (gpus < 0 || gpus > 64) {
    return invalidArgument("a node may have 0 to 64 GPUs, not " + std::to_string(gpus));
  }
  auto need = [&](int n) -> Status {
    if (gpus == n) return Status::ok();
    return invalidArgument("profile " + std::string(name) + " describes " + std::to_string(n) +
                           " GPUs but the node has " + std::to_string(gpus));
  };
  if (name == "hgx-b200-8" || name == "hgx-h200-8" || name == "hgx-h100-8" || name == "hgx-a100-8") {
    if (Status s = need(8); !s.isOk()) return s;
    if (name == "hgx-b200-8") return nvswitchProfile(std::string(name), 8, 18, 900, 64);
    if (name == "hgx-a100-8") return nvswitchProfile(std::string(name), 8, 12, 300, kPcieGen4);
    return nvswitchProfile(std::string(name), 8, 18, 450, 64);
  }
  if (name == "dgx1-v100-8") {
    if (Status s = need(8); !s.isOk()) return s;
    return dgx1Profile();
  }
  if (name == "pcie-8" || name == "pcie-nvbridge-8") {
    if (Status s = need(8); !s.isOk()) return s;
    return pcieProfile(std::string(name), 8, kPcieGen4, name == "pcie-nvbridge-8");
  }
  if (name == "pcie-4" || name == "pcie-nvbridge-4") {
    if (Status s = need(4); !s.isOk()) return s;
    return pcieProfile(std::string(name), 4, kPcieGen4, name == "pcie-nvbridge-4");
  }
  if (name.rfind("pcie-", 0) == 0) {
    // Generic PCIe box: every pair through the host bridge.
    GpuTopology t(gpus, std::string(name), pcieBandwidth(LinkKind::kHostBridge, kPcieGen4));
    for (int a = 0; a < gpus; ++a) {
      for (int b = a + 1; b < gpus; ++b) t.setLink(a, b, pcieLink(LinkKind::kHostBridge, kPcieGen4));
    }
    t.finalize();
    return t;
  }
  std::string known;
  for (const std::string& p : builtinProfiles()) known += (known.empty() ? "" : ", ") + p;
  return invalidArgument("unknown topology profile \"" + std::string(name) + "\"; built-in: " + known);
}

std::string profileForProduct(std::string_view product, int gpus) {
  std::string p = upper(product);
  if (gpus == 8) {
    if (contains(p, "B200")) return "hgx-b200-8";
    if (contains(p, "H200")) return "hgx-h200-8";
    if (contains(p, "H100") && !contains(p, "PCIE") && !contains(p, "NVL")) return "hgx-h100-8";
    if (contains(p, "H800") && !contains(p, "PCIE")) return "hgx-h100-8";
    if (contains(p, "A100") && (contains(p, "SXM") || contains(p, "HGX"))) return "hgx-a100-8";
    if (contains(p, "A800") && contains(p, "SXM")) return "hgx-a100-8";
    if (contains(p, "V100") && contains(p, "SXM")) return "dgx1-v100-8";
    return "pcie-8";
  }
  if (gpus == 4) return "pcie-4";
  return "pcie-" + std::to_string(gpus);
}

std::vector<std::string> builtinProfiles() {
  return {"hgx-b200-8", "hgx-h200-8", "hgx-h100-8",      "hgx-a100-8",      "dgx1-v100-8",
          "pcie-8",     "pcie-4",     "pcie-nvbridge-8", "pcie-nvbridge-4", "pcie-<N>"};
}

Result<GpuTopology> topologyFromMatrix(const std::vector<std::vector<std::string>>& rows,
                                       double nvlink_link_bandwidth, double pcie_bandwidth) {
  const int n = static_cast<int>(rows.size());
  if (n == 0 || n > 64) return invalidArgument("the link matrix must have 1 to 64 rows");
  GpuTopology t(n, "annotation", pcieBandwidth(LinkKind::kCrossSocket, pcie_bandwidth));
  for (int a = 0; a < n; ++a) {
    if (static_cast<int>(rows[static_cast<size_t>(a)].size()) != n) {
      return invalidArgument("row " + std::to_string(a) + " of the link matrix has " +
                             std::to_string(rows[static_cast<size_t>(a)].size()) +
                             " cells; the matrix must be square (" + std::to_string(n) + ")");
    }
  }
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      std::string cell = rows[static_cast<size_t>(a)][static_cast<size_t>(b)];
      double bandwidth = -1;
      if (size_t colon = cell.find(':'); colon != std::string::npos) {
        const std::string_view number = trim(std::string_view(cell).substr(colon + 1));
        const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), bandwidth);
        if (number.empty() || ec != std::errc() || end != number.data() + number.size() ||
            !std::isfinite(bandwidth) || bandwidth < 0 || bandwidth > kMaxCellBandwidth) {
          return invalidArgument("cell [" + std::to_string(a) + "][" + std::to_string(b) + "] \"" + cell +
                                 "\": bandwidth after ':' must be a number of GB/s from 0 to 1000000");
        }
        cell = cell.substr(0, colon);
      }
      int links = 0;
      Result<LinkKind> kind = parseLinkKind(cell, &links);
      if (!kind.isOk()) {
        return invalidArgument("cell [" + std::to_string(a) + "][" + std::to_string(b) +
                               "]: " + kind.status().message());
      }
      if ((a == b) != (kind.value() == LinkKind::kSelf)) {
        return invalidArgument("cell [" + std::to_string(a) + "][" + std::to_string(b) +
                               "]: X belongs on the diagonal and only there");
      }
      if (a >= b) continue;
      Link link{kind.value(), links, bandwidth};
      if (bandwidth < 0) {
        link.bandwidth = kind.value() == LinkKind::kNVLink     ? links * nvlink_link_bandwidth
                         : kind.value() == LinkKind::kNVSwitch ? 18 * nvlink_link_bandwidth
                                                               : pcieBandwidth(kind.value(), pcie_bandwidth);
      }
      t.setLink(a, b, link);
    }
  }
  t.finalize();
  return t;
}

}  // namespace troupe::model
