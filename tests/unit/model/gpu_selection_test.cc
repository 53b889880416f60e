// Whole-GPU set selection: optimality against brute force on every free mask, the documented
// tie-break order, memo consistency, and go-gpuallocator parity on the DGX-1 V100.
#include "troupe/model/gpu_selection.h"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "troupe/common/strings.h"
#include "troupe/model/topology.h"

namespace {

using troupe::model::chooseWholeGpus;
using troupe::model::GpuSet;
using troupe::model::GpuTopology;
using troupe::model::searchWholeGpus;

constexpr double kEps = 1e-9;

struct Named {
  std::string name;
  GpuTopology topology;
};

// Every built-in profile of at most 8 GPUs, plus measured matrices with several NVLink domains
// of different sizes (the cases where one_domain matters most).
std::vector<Named> smallTopologies() {
  std::vector<Named> out;
  const std::pair<const char*, int> profiles[] = {
      {"hgx-b200-8", 8},      {"hgx-h200-8", 8}, {"hgx-h100-8", 8}, {"hgx-a100-8", 8},
      {"dgx1-v100-8", 8},     {"pcie-8", 8},     {"pcie-4", 4},     {"pcie-nvbridge-8", 8},
      {"pcie-nvbridge-4", 4}, {"pcie-1", 1},     {"pcie-2", 2},     {"pcie-3", 3},
      {"pcie-5", 5},          {"pcie-6", 6},     {"pcie-7", 7},
  };
  for (const auto& [name, gpus] : profiles) {
    auto t = troupe::model::makeProfile(name, gpus);
    REQUIRE(t.isOk());
    out.push_back({name, t.value()});
  }
  const std::pair<const char*, const char*> matrices[] = {
      // 4x RTX 8000: two NV2 bridges, 0-3 and 1-2.
      {"rtx8000-4", R"([["X","NODE","SYS","NV2"],["NODE","X","NV2","SYS"],
                        ["SYS","NV2","X","NODE"],["NV2","SYS","NODE","X"]])"},
      // Uneven domains: {0,1,2} NV4 triangle, {3,4} NV2, {5} alone; mixed PCIe elsewhere.
      {"uneven-6", R"([["X","NV4","NV4","PIX","PHB","SYS"],
                       ["NV4","X","NV4:90","PHB","PIX","SYS"],
                       ["NV4","NV4:90","X","SYS","SYS","PXB"],
                       ["PIX","PHB","SYS","X","NV2","NODE"],
                       ["PHB","PIX","SYS","NV2","X","NODE"],
                       ["SYS","SYS","PXB","NODE","NODE","X"]])"},
      // NVLink slower than PCIe (NV1 = 25 GB/s, PIX = 32 GB/s): the best pair overall crosses
      // domains, so one_domain must settle for a slower pair.
      {"slow-nvlink-4", R"([["X","NV1","PIX","SYS"],["NV1","X","SYS","PIX"],
                            ["PIX","SYS","X","NV1"],["SYS","PIX","NV1","X"]])"},
      // Two NVSwitch islands of four with different speeds.
      {"islands-8", R"([["X","NVS","NVS","NVS","SYS","SYS","SYS","SYS"],
                        ["NVS","X","NVS","NVS","SYS","SYS","SYS","SYS"],
                        ["NVS","NVS","X","NVS","SYS","SYS","SYS","SYS"],
                        ["NVS","NVS","NVS","X","SYS","SYS","SYS","SYS"],
                        ["SYS","SYS","SYS","SYS","X","NV6","NV6","NV6"],
                        ["SYS","SYS","SYS","SYS","NV6","X","NV6","NV6"],
                        ["SYS","SYS","SYS","SYS","NV6","NV6","X","NV6"],
                        ["SYS","SYS","SYS","SYS","NV6","NV6","NV6","X"]])"},
  };
  for (const auto& [name, text] : matrices) {
    auto rows = troupe::parseMatrixText(text);
    REQUIRE(rows.isOk());
    auto t = troupe::model::topologyFromMatrix(rows.value(), 25.0, 32.0);
    REQUIRE(t.isOk());
    out.push_back({name, t.value()});
  }
  return out;
}

// --- an independent reference, written from the header's contract only ----------------------

double pairBandwidth(const GpuTopology& t, int a, int b) { return t.link(a, b).bandwidth; }

double bestPair(const GpuTopology& t) {
  double best = 0;
  for (int a = 0; a < t.size(); ++a)
    for (int b = a + 1; b < t.size(); ++b) best = std::max(best, pairBandwidth(t, a, b));
  return best;
}

// Slowest pair inside the set; a single GPU counts as the node's best link.
double refBottleneck(const GpuTopology& t, uint32_t mask) {
  if (std::popcount(mask) <= 1) return bestPair(t);
  double worst = 1e300;
  for (int a = 0; a < t.size(); ++a)
    for (int b = a + 1; b < t.size(); ++b)
      if ((mask >> a & 1) && (mask >> b & 1)) worst = std::min(worst, pairBandwidth(t, a, b));
  return worst;
}

double refInternal(const GpuTopology& t, uint32_t mask) {
  double sum = 0;
  for (int a = 0; a < t.size(); ++a)
    for (int b = a + 1; b < t.size(); ++b)
      if ((mask >> a & 1) && (mask >> b & 1)) sum += pairBandwidth(t, a, b);
  return sum;
}

std::vector<uint32_t> subsetsOf(uint32_t pool, int k) {
  std::vector<uint32_t> out;
  for (uint32_t m = pool;; m = (m - 1) & pool) {
    if (std::popcount(m) == k) out.push_back(m);
    if (m == 0) break;
  }
  return out;
}

// How good the GPUs left free are: for 2, 4 and 8 (those <= node size), the best bottleneck of
// that many among what remains, over the node's best link; averaged.
double refLeftover(const GpuTopology& t, uint32_t remaining) {
  const double top = bestPair(t);
  double sum = 0;
  int sizes = 0;
  for (int s : {2, 4, 8}) {
    if (s > t.size()) break;
    ++sizes;
    if (std::popcount(remaining) < s || top <= 0) continue;
    double best = 0;
    for (uint32_t m : subsetsOf(remaining, s)) best = std::max(best, refBottleneck(t, m));
    sum += best / top;
  }
  return sizes == 0 ? 1.0 : sum / sizes;
}

// Lowest indices first: the sorted index lists compared lexicographically.
bool refLexLess(uint32_t a, uint32_t b) {
  auto ia = troupe::model::maskToIndices(a), ib = troupe::model::maskToIndices(b);
  return std::lexicographical_compare(ia.begin(), ia.end(), ib.begin(), ib.end());
}

struct RefChoice {
  uint32_t mask = 0;
  double bottleneck = -1;
};

// The documented order: bottleneck, then leftover, then internal bandwidth, then lowest indices.
std::optional<RefChoice> reference(const GpuTopology& t, uint32_t free, int k, bool one_domain) {
  std::vector<uint32_t> candidates;
  for (uint32_t m : subsetsOf(free, k)) {
    if (k <= 0) break;
    if (one_domain) {
      const uint32_t domain = static_cast<uint32_t>(t.domainOf(std::countr_zero(m)));
      if ((m & ~domain) != 0) continue;
    }
    candidates.push_back(m);
  }
  if (candidates.empty()) return std::nullopt;
  RefChoice best;
  double best_left = 0, best_internal = 0;
  for (uint32_t m : candidates) {
    const double b = refBottleneck(t, m);
    const double left = refLeftover(t, free & ~m);
    const double in = refInternal(t, m);
    bool wins = best.bottleneck < 0;
    if (!wins) {
      if (b > best.bottleneck + kEps)
        wins = true;
      else if (b < best.bottleneck - kEps)
        wins = false;
      else if (left > best_left + kEps)
        wins = true;
      else if (left < best_left - kEps)
        wins = false;
      else if (in > best_internal + kEps)
        wins = true;
      else if (in < best_internal - kEps)
        wins = false;
      else
        wins = refLexLess(m, best.mask);
    }
    if (wins) {
      best = {m, b};
      best_left = left;
      best_internal = in;
    }
  }
  return best;
}

void allocateSequentially(const GpuTopology& t, int k, std::vector<std::vector<int>>* out) {
  uint64_t free = (uint64_t{1} << t.size()) - 1;
  while (std::popcount(free) >= k) {
    auto set = chooseWholeGpus(t, free, k, false);
    REQUIRE(set.has_value());
    out->push_back(troupe::model::maskToIndices(set->mask));
    free &= ~set->mask;
  }
}

}  // namespace

TEST_CASE("gpu selection: mask helpers and binomial", "[selection]") {
  CHECK(troupe::model::maskToIndices(0).empty());
  CHECK(troupe::model::maskToIndices(0b10110) == std::vector<int>{1, 2, 4});
  CHECK(troupe::model::maskToIndices(uint64_t{1} << 63) == std::vector<int>{63});
  CHECK(troupe::model::indicesToMask({0, 3, 7}) == 0x89u);
  CHECK(troupe::model::indicesToMask({}) == 0u);
  const std::pair<std::pair<int, int>, int64_t> binomials[] = {
      {{8, 4}, 70},
      {{8, 0}, 1},
      {{8, 8}, 1},
      {{8, 9}, 0},
      {{8, -1}, 0},
      {{16, 8}, 12870},
      {{5, 2}, 10},
      {{62, 31}, 465428353255261088LL},
      {{64, 32}, 1832624140942590534LL},                 // exact: no intermediate overflow
      {{100, 50}, std::numeric_limits<int64_t>::max()},  // saturates instead of wrapping
  };
  for (const auto& [nk, want] : binomials) {
    INFO(nk.first << " choose " << nk.second);
    CHECK(troupe::model::binomial(nk.first, nk.second) == want);
  }
}

TEST_CASE("gpu selection: the bottleneck is optimal for every free mask and size",
          "[selection][exhaustive]") {
  for (const Named& n : smallTopologies()) {
    const GpuTopology& t = n.topology;
    const int size = t.size();
    const uint32_t all = (1u << size) - 1;
    const double top = bestPair(t);
    long checked = 0;
    for (uint32_t free = 0; free <= all; ++free) {
      for (int k = 0; k <= size + 1; ++k) {
        for (bool one_domain : {false, true}) {
          // The best bottleneck and whether any set exists, by brute force.
          double want = -1;
          for (uint32_t m : subsetsOf(free, k)) {
            if (k <= 0) break;
            if (one_domain) {
              const uint32_t d = static_cast<uint32_t>(t.domainOf(std::countr_zero(m)));
              if ((m & ~d) != 0) continue;
            }
            want = std::max(want, refBottleneck(t, m));
          }
          bool any_domain = false;
          for (uint64_t d : t.nvlinkDomains()) any_domain |= std::popcount(d & free) >= k;
          const bool expect_set = k > 0 && (one_domain ? any_domain : std::popcount(free) >= k);

          auto got = chooseWholeGpus(t, free, k, one_domain);
          ++checked;
          // nullopt iff no domain has k free (one_domain), iff fewer than k are free (otherwise).
          if (got.has_value() != expect_set) {
            FAIL_CHECK(n.name << " free=" << free << " k=" << k << " one_domain=" << one_domain
                              << ": expected " << (expect_set ? "a set" : "no set"));
          }
          if (want < 0) {
            if (got.has_value()) {
              FAIL_CHECK(n.name << " free=" << free << " k=" << k << " one_domain=" << one_domain
                                << ": expected no set, got mask " << got->mask);
            }
            continue;
          }
          if (!got.has_value()) {
            FAIL_CHECK(n.name << " free=" << free << " k=" << k << " one_domain=" << one_domain
                              << ": expected a set with bottleneck " << want << ", got none");
            continue;
          }
          const double ideal = t.bestBottleneck(k);
          const double want_quality = ideal > 0 ? std::min(1.0, want / ideal) : 1.0;
          const uint32_t m = static_cast<uint32_t>(got->mask);
          const bool ok =
              got->mask <= all && (m & ~free) == 0 && std::popcount(m) == k &&
              std::abs(got->bottleneck - want) < 1e-6 && std::abs(refBottleneck(t, m) - want) < 1e-6 &&
              (!one_domain || (m & ~static_cast<uint32_t>(t.domainOf(std::countr_zero(m)))) == 0) &&
              std::abs(got->quality - want_quality) < 1e-9 && got->leftover >= 0 &&
              got->leftover <= 1.0 + 1e-12;
          if (!ok) {
            FAIL_CHECK(n.name << " free=" << free << " k=" << k << " one_domain=" << one_domain
                              << ": got mask " << got->mask << " bottleneck " << got->bottleneck
                              << " quality " << got->quality << ", best possible " << want << " (top link "
                              << top << ")");
          }
        }
      }
    }
    INFO(n.name << ": " << checked << " (free mask, k, one_domain) combinations");
    CHECK(checked > 0);
  }
}

TEST_CASE("gpu selection: ties break by leftover, internal bandwidth, lowest indices",
          "[selection][exhaustive]") {
  for (const Named& n : smallTopologies()) {
    const GpuTopology& t = n.topology;
    const uint32_t all = (1u << t.size()) - 1;
    int mismatches = 0;
    for (uint32_t free = 0; free <= all; ++free) {
      for (int k = 1; k <= t.size(); ++k) {
        for (bool one_domain : {false, true}) {
          auto want = reference(t, free, k, one_domain);
          auto got = searchWholeGpus(t, free, k, one_domain);
          REQUIRE(want.has_value() == got.has_value());
          if (!want) continue;
          if (got->mask != want->mask && ++mismatches <= 5) {
            FAIL_CHECK(n.name << " free=" << free << " k=" << k << " one_domain=" << one_domain << ": chose "
                              << got->mask << ", documented order gives " << want->mask);
          }
        }
      }
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("gpu selection: the memo returns what a fresh search returns", "[selection]") {
  for (const Named& n : smallTopologies()) {
    const GpuTopology& t = n.topology;
    const uint32_t all = (1u << t.size()) - 1;
    for (int pass = 0; pass < 2; ++pass) {  // the second pass is served from the memo
      for (uint32_t free = 0; free <= all; ++free) {
        for (int k = 0; k <= t.size(); ++k) {
          for (bool one_domain : {false, true}) {
            auto memo = chooseWholeGpus(t, free, k, one_domain);
            auto fresh = searchWholeGpus(t, free, k, one_domain);
            const bool same =
                memo.has_value() == fresh.has_value() &&
                (!memo || (memo->mask == fresh->mask && memo->bottleneck == fresh->bottleneck &&
                           memo->quality == fresh->quality && memo->leftover == fresh->leftover));
            if (!same) {
              FAIL_CHECK(n.name << " pass " << pass << " free=" << free << " k=" << k
                                << " one_domain=" << one_domain << ": memo and search differ");
            }
          }
        }
      }
    }
  }
  // The memo is per topology: the same key on another topology gets that topology's answer.
  auto h100 = troupe::model::makeProfile("hgx-h100-8", 8).value();
  auto pcie = troupe::model::makeProfile("pcie-8", 8).value();
  auto a = chooseWholeGpus(h100, 0xFF, 2, true);
  auto b = chooseWholeGpus(pcie, 0xFF, 2, true);
  REQUIRE(a.has_value());
  CHECK_FALSE(b.has_value());  // pcie-8 has no NVLink domain of 2
}

TEST_CASE("gpu selection: DGX-1 V100 matches go-gpuallocator besteffort", "[selection][parity]") {
  auto t = troupe::model::makeProfile("dgx1-v100-8", 8);
  REQUIRE(t.isOk());
  SECTION("allocations of 2 on an empty node") {
    std::vector<std::vector<int>> got;
    allocateSequentially(t.value(), 2, &got);
    CHECK(got == std::vector<std::vector<int>>{{0, 3}, {1, 2}, {4, 7}, {5, 6}});
  }
  SECTION("allocations of 4 on an empty node") {
    std::vector<std::vector<int>> got;
    allocateSequentially(t.value(), 4, &got);
    CHECK(got == std::vector<std::vector<int>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
  }
  SECTION("a single GPU comes from a 2-NVLink pair, keeping a full quad") {
    auto one = chooseWholeGpus(t.value(), 0xFF, 1, false);
    REQUIRE(one.has_value());
    CHECK(std::popcount(one->mask) == 1);
    auto rest = chooseWholeGpus(t.value(), 0xFF & ~one->mask, 4, false);
    REQUIRE(rest.has_value());
    CHECK(rest->bottleneck == Approx(25.0));
  }
}

TEST_CASE("gpu selection: one_domain keeps the set inside an NVLink domain even when slower", "[selection]") {
  auto t = troupe::model::topologyFromMatrix({{"X", "NV1", "PIX", "SYS"},
                                              {"NV1", "X", "SYS", "PIX"},
                                              {"PIX", "SYS", "X", "NV1"},
                                              {"SYS", "PIX", "NV1", "X"}},
                                             25.0, 32.0);
  REQUIRE(t.isOk());
  auto any = chooseWholeGpus(t.value(), 0xF, 2, false);
  REQUIRE(any.has_value());
  CHECK(any->mask == 0x5u);  // {0,2} over PCIe, 32 GB/s
  auto inside = chooseWholeGpus(t.value(), 0xF, 2, true);
  REQUIRE(inside.has_value());
  CHECK(inside->mask == 0x3u);  // {0,1} over NV1, 25 GB/s
  CHECK(inside->bottleneck == Approx(25.0));
  CHECK_FALSE(chooseWholeGpus(t.value(), 0x5, 2, true).has_value());  // {0,2}: two domains
}

TEST_CASE("gpu selection: 4x RTX 8000 pairs follow the NVLink bridges", "[selection][parity]") {
  auto rows = troupe::parseMatrixText(R"([["X","NODE","SYS","NV2"],["NODE","X","NV2","SYS"],
                                          ["SYS","NV2","X","NODE"],["NV2","SYS","NODE","X"]])");
  REQUIRE(rows.isOk());
  auto t = troupe::model::topologyFromMatrix(rows.value(), 25.0, 32.0);
  REQUIRE(t.isOk());
  std::vector<std::vector<int>> got;
  allocateSequentially(t.value(), 2, &got);
  CHECK(got == std::vector<std::vector<int>>{{0, 3}, {1, 2}});
}

TEST_CASE("gpu selection: larger nodes fall back to greedy and stay valid", "[selection]") {
  // 16 GPUs choose 8 = 12870 sets > kExhaustiveLimit: the greedy path.
  auto t = troupe::model::makeProfile("pcie-16", 16);
  REQUIRE(t.isOk());
  auto set = chooseWholeGpus(t.value(), 0xFFFF, 8, false);
  REQUIRE(set.has_value());
  CHECK(std::popcount(set->mask) == 8);
  CHECK((set->mask & ~uint64_t{0xFFFF}) == 0);
  CHECK(set->bottleneck > 0);
  auto none = chooseWholeGpus(t.value(), 0x00FF, 9, false);
  CHECK_FALSE(none.has_value());
}
