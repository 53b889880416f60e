// Intra-node topology: built-in profiles, product mapping, the annotation matrix, bottlenecks.
#include "troupe/model/topology.h"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "troupe/common/strings.h"

namespace {

using troupe::Code;
using troupe::model::GpuTopology;
using troupe::model::LinkKind;

GpuTopology profile(const std::string& name, int gpus) {
  auto t = troupe::model::makeProfile(name, gpus);
  INFO(name << ": " << t.status().message());
  REQUIRE(t.isOk());
  return t.value();
}

// Independent brute force: the best minimum pairwise bandwidth over every k-subset.
double bruteBestBottleneck(const GpuTopology& t, int k) {
  const int n = t.size();
  double best_pair = 0;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) best_pair = std::max(best_pair, t.link(a, b).bandwidth);
  if (k == 1) return best_pair;
  double best = 0;
  for (uint32_t m = 0; m < (1u << n); ++m) {
    if (std::popcount(m) != k) continue;
    double worst = 1e300;
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b)
        if ((m >> a & 1) && (m >> b & 1)) worst = std::min(worst, t.link(a, b).bandwidth);
    best = std::max(best, worst);
  }
  return best;
}

std::pair<int, int> ordered(int a, int b) { return {std::min(a, b), std::max(a, b)}; }

}  // namespace

TEST_CASE("topology: NVSwitch profiles are flat, one domain", "[topology]") {
  struct Case {
    const char* name;
    int links;
    double bandwidth;
  };
  const Case cases[] = {
      {"hgx-h100-8", 18, 450.0},
      {"hgx-h200-8", 18, 450.0},
      {"hgx-b200-8", 18, 900.0},
      {"hgx-a100-8", 12, 300.0},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    GpuTopology t = profile(c.name, 8);
    CHECK(t.size() == 8);
    CHECK(t.profile() == c.name);
    for (int a = 0; a < 8; ++a) {
      CHECK(t.link(a, a).kind == LinkKind::kSelf);
      for (int b = 0; b < 8; ++b) {
        if (a == b) continue;
        CHECK(t.link(a, b).kind == LinkKind::kNVSwitch);
        CHECK(t.link(a, b).nvlinks == c.links);
        CHECK(t.link(a, b).bandwidth == Approx(c.bandwidth));
        CHECK(t.nvlinked(a, b));
      }
      CHECK(t.numa(a) == (a < 4 ? 0 : 1));
      CHECK(t.domainOf(a) == 0xFFu);
    }
    REQUIRE(t.nvlinkDomains().size() == 1);
    CHECK(t.nvlinkDomains()[0] == 0xFFu);
    CHECK(t.maxBandwidth() == Approx(c.bandwidth));
    for (int k = 1; k <= 8; ++k) CHECK(t.bestBottleneck(k) == Approx(c.bandwidth));
    CHECK(t.bestBottleneck(0) == 0.0);
    CHECK(t.bestBottleneck(9) == 0.0);
    CHECK(t.internalBandwidth(0xFF) == Approx(28 * c.bandwidth));
    CHECK(t.cutBandwidth(0x0F, 0xF0) == Approx(16 * c.bandwidth));
  }
}

TEST_CASE("topology: pcie-8 has eight singleton domains and PCIe levels", "[topology]") {
  GpuTopology t = profile("pcie-8", 8);
  REQUIRE(t.nvlinkDomains().size() == 8);
  std::set<uint64_t> domains(t.nvlinkDomains().begin(), t.nvlinkDomains().end());
  for (int g = 0; g < 8; ++g) {
    CHECK(domains.count(uint64_t{1} << g) == 1);
    CHECK(t.domainOf(g) == (uint64_t{1} << g));
  }
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      INFO("pair " << a << "-" << b);
      CHECK_FALSE(t.nvlinked(a, b));
      const LinkKind want = a / 2 == b / 2   ? LinkKind::kPcieSwitch
                            : a / 4 == b / 4 ? LinkKind::kHostBridge
                                             : LinkKind::kCrossSocket;
      CHECK(t.link(a, b).kind == want);
    }
  }
  // Bandwidth falls with distance.
  CHECK(t.link(0, 1).bandwidth > t.link(0, 2).bandwidth);
  CHECK(t.link(0, 2).bandwidth > t.link(0, 4).bandwidth);
  CHECK(t.bestBottleneck(2) == Approx(t.link(0, 1).bandwidth));
  CHECK(t.bestBottleneck(4) == Approx(t.link(0, 2).bandwidth));
  CHECK(t.bestBottleneck(8) == Approx(t.link(0, 4).bandwidth));

  GpuTopology bridged = profile("pcie-nvbridge-8", 8);
  REQUIRE(bridged.nvlinkDomains().size() == 4);
  for (uint64_t d : bridged.nvlinkDomains()) CHECK(std::popcount(d) == 2);
  CHECK(bridged.link(2, 3).kind == LinkKind::kNVLink);
  CHECK(bridged.domainOf(3) == 0x0Cu);

  GpuTopology four = profile("pcie-4", 4);
  CHECK(four.size() == 4);
  CHECK(four.link(0, 1).kind == LinkKind::kPcieSwitch);
  CHECK(four.link(0, 3).kind == LinkKind::kSameNuma);
  CHECK(four.nvlinkDomains().size() == 4);

  GpuTopology three = profile("pcie-3", 3);
  CHECK(three.size() == 3);
  CHECK(three.link(0, 2).kind == LinkKind::kHostBridge);
}

TEST_CASE("topology: dgx1-v100-8 is the go-gpuallocator hybrid cube mesh", "[topology]") {
  GpuTopology t = profile("dgx1-v100-8", 8);
  // performance-anchors 5.1, NewDGX1VoltaNode.
  const std::set<std::pair<int, int>> two = {{0, 3}, {0, 4}, {1, 2}, {1, 5}, {2, 3}, {4, 7}, {5, 6}, {6, 7}};
  const std::set<std::pair<int, int>> one = {{0, 1}, {0, 2}, {1, 3}, {2, 6}, {3, 7}, {4, 5}, {4, 6}, {5, 7}};
  for (int a = 0; a < 8; ++a) {
    int links_of_a = 0;
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      INFO("pair " << a << "-" << b);
      const auto p = ordered(a, b);
      const auto& l = t.link(a, b);
      if (two.count(p)) {
        CHECK(l.kind == LinkKind::kNVLink);
        CHECK(l.nvlinks == 2);
        CHECK(l.bandwidth == Approx(50.0));
      } else if (one.count(p)) {
        CHECK(l.kind == LinkKind::kNVLink);
        CHECK(l.nvlinks == 1);
        CHECK(l.bandwidth == Approx(25.0));
      } else {
        CHECK_FALSE(t.nvlinked(a, b));
        CHECK(l.nvlinks == 0);
        // Every NVLink-less pair of the cube mesh crosses the CPUs.
        CHECK(l.kind == LinkKind::kCrossSocket);
        CHECK(l.bandwidth < 25.0);
      }
      links_of_a += l.nvlinks;
    }
    CHECK(links_of_a == 6);  // 6 NVLinks per V100
    CHECK(t.numa(a) == a / 4);
  }
  REQUIRE(t.nvlinkDomains().size() == 1);
  CHECK(t.nvlinkDomains()[0] == 0xFFu);
  CHECK(t.bestBottleneck(1) == Approx(50.0));
  CHECK(t.bestBottleneck(2) == Approx(50.0));
  CHECK(t.bestBottleneck(3) == Approx(25.0));
  CHECK(t.bestBottleneck(4) == Approx(25.0));
  CHECK(t.bottleneck(0x0F) == Approx(25.0));  // {0,1,2,3}
  CHECK(t.bottleneck(0x09) == Approx(50.0));  // {0,3}
  CHECK(t.bottleneck(0x41) < 25.0);           // {0,6}: no NVLink
  CHECK(t.bottleneck(0x01) == Approx(50.0));  // one GPU: the node's best link
  CHECK(t.internalBandwidth(0x0F) == Approx(225.0));
}

TEST_CASE("topology: bestBottleneck equals brute force on every profile", "[topology]") {
  const std::pair<const char*, int> profiles[] = {
      {"hgx-h100-8", 8}, {"hgx-a100-8", 8},      {"dgx1-v100-8", 8},     {"pcie-8", 8},
      {"pcie-4", 4},     {"pcie-nvbridge-8", 8}, {"pcie-nvbridge-4", 4}, {"pcie-5", 5},
  };
  for (const auto& [name, gpus] : profiles) {
    GpuTopology t = profile(name, gpus);
    for (int k = 1; k <= gpus; ++k) {
      INFO(name << " k=" << k);
      CHECK(t.bestBottleneck(k) == Approx(bruteBestBottleneck(t, k)));
    }
  }
}

TEST_CASE("topology: makeProfile rejects wrong sizes and unknown names", "[topology]") {
  auto wrong = troupe::model::makeProfile("hgx-h100-8", 4);
  REQUIRE_FALSE(wrong.isOk());
  CHECK(wrong.status().code() == Code::kInvalidArgument);
  CHECK_THAT(wrong.status().message(), Catch::Contains("hgx-h100-8") && Catch::Contains("4"));

  auto unknown = troupe::model::makeProfile("dgx-9000", 8);
  REQUIRE_FALSE(unknown.isOk());
  CHECK_THAT(unknown.status().message(), Catch::Contains("dgx-9000") && Catch::Contains("hgx-h100-8"));

  auto too_many = troupe::model::makeProfile("pcie-65", 65);
  REQUIRE_FALSE(too_many.isOk());
  CHECK_THAT(too_many.status().message(), Catch::Contains("65"));

  auto names = troupe::model::builtinProfiles();
  for (const char* must : {"hgx-h100-8", "dgx1-v100-8", "pcie-8", "pcie-4"}) {
    CHECK(std::find(names.begin(), names.end(), must) != names.end());
  }
}

TEST_CASE("topology: profileForProduct maps GPU products to profiles", "[topology]") {
  struct Case {
    const char* product;
    int gpus;
    const char* want;
  };
  const Case cases[] = {
      {"NVIDIA-H100-80GB-HBM3", 8, "hgx-h100-8"},
      {"NVIDIA-H100-SXM5-80GB", 8, "hgx-h100-8"},
      {"nvidia-h100-80gb-hbm3", 8, "hgx-h100-8"},
      {"NVIDIA-H100-PCIe", 8, "pcie-8"},
      {"NVIDIA-H100-NVL", 8, "pcie-8"},
      {"NVIDIA-H200", 8, "hgx-h200-8"},
      {"NVIDIA-B200", 8, "hgx-b200-8"},
      {"NVIDIA-A100-SXM4-80GB", 8, "hgx-a100-8"},
      {"NVIDIA-A100-SXM4-40GB", 8, "hgx-a100-8"},
      {"NVIDIA-A100-PCIE-40GB", 8, "pcie-8"},
      {"Tesla-V100-SXM2-16GB", 8, "dgx1-v100-8"},
      {"Tesla-V100-SXM2-32GB", 8, "dgx1-v100-8"},
      {"Tesla-V100-PCIE-16GB", 8, "pcie-8"},
      {"NVIDIA-L40S", 8, "pcie-8"},
      {"", 8, "pcie-8"},
      {"NVIDIA-H100-80GB-HBM3", 4, "pcie-4"},
      {"NVIDIA-L40S", 4, "pcie-4"},
      {"NVIDIA-A100-SXM4-80GB", 4, "pcie-4"},
      {"NVIDIA-L4", 2, "pcie-2"},
      {"NVIDIA-L4", 1, "pcie-1"},
  };
  for (const Case& c : cases) {
    INFO(c.product << " x" << c.gpus);
    const std::string got = troupe::model::profileForProduct(c.product, c.gpus);
    CHECK(got == c.want);
    // Whatever it picks must be a profile that exists for that many GPUs.
    CHECK(troupe::model::makeProfile(got, c.gpus).isOk());
  }
}

TEST_CASE("topology: parseLinkKind accepts nvidia-smi spellings", "[topology]") {
  struct Case {
    const char* text;
    LinkKind kind;
    int nvlinks;
  };
  const Case cases[] = {
      {"X", LinkKind::kSelf, 0},
      {"NV18", LinkKind::kNVLink, 18},
      {"nv2", LinkKind::kNVLink, 2},
      {"NVS", LinkKind::kNVSwitch, 0},
      {"NVSwitch", LinkKind::kNVSwitch, 0},
      {"PIX", LinkKind::kPcieSwitch, 0},
      {"PXB", LinkKind::kPcieMulti, 0},
      {"PHB", LinkKind::kHostBridge, 0},
      {"NODE", LinkKind::kSameNuma, 0},
      {"SYS", LinkKind::kCrossSocket, 0},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    int links = -1;
    auto k = troupe::model::parseLinkKind(c.text, &links);
    REQUIRE(k.isOk());
    CHECK(k.value() == c.kind);
    CHECK(links == c.nvlinks);
  }
  for (const char* bad : {"NV", "NV0", "NV65", "NVx", "QPI", "", "NV-2"}) {
    INFO(bad);
    int links = 0;
    auto k = troupe::model::parseLinkKind(bad, &links);
    REQUIRE_FALSE(k.isOk());
    CHECK_THAT(k.status().message(), Catch::Contains("\"" + std::string(bad) + "\""));
  }
}

TEST_CASE("topology: parseMatrixText reads the annotation text", "[topology]") {
  SECTION("good matrices") {
    auto rows = troupe::parseMatrixText(R"([["X","NV18"],["NV18","X"]])");
    REQUIRE(rows.isOk());
    CHECK(rows.value() == std::vector<std::vector<std::string>>{{"X", "NV18"}, {"NV18", "X"}});

    auto spaced = troupe::parseMatrixText(" [ [ \"X\" , \"PIX\" ] ,\n [ \"PIX\" , \"X\" ] ] \n");
    REQUIRE(spaced.isOk());
    CHECK(spaced.value() == std::vector<std::vector<std::string>>{{"X", "PIX"}, {"PIX", "X"}});

    auto one = troupe::parseMatrixText(R"([["X"]])");
    REQUIRE(one.isOk());
    CHECK(one.value().size() == 1);
  }
  SECTION("bad texts") {
    const char* bad[] = {
        "",
        "X NV18",
        R"([["X","NV18"],["NV18","X"])",  // missing closing ]
        R"([["X",NV18]])",                // unquoted cell
        R"([["X","NV18]])",               // unterminated string
        R"([["X"]] trailing)",
        R"(["X"])",  // a row that is not an array
        "[ ",        // ends right after whitespace
        R"([["X"] )",
    };
    for (const char* text : bad) {
      INFO("text: " << text);
      auto r = troupe::parseMatrixText(text);
      CHECK_FALSE(r.isOk());
      if (!r.isOk()) {
        CHECK(r.status().code() == Code::kInvalidArgument);
      }
    }
  }
  SECTION("a view is never read past its end") {
    // The text is a prefix of a longer buffer whose next byte would close the matrix.
    const std::string buffer = R"([["X"] ])";
    auto r = troupe::parseMatrixText(std::string_view(buffer).substr(0, buffer.size() - 1));
    CHECK_FALSE(r.isOk());
    auto whole = troupe::parseMatrixText(buffer);
    CHECK(whole.isOk());
  }
}

TEST_CASE("topology: topologyFromMatrix builds links, domains and overrides", "[topology]") {
  SECTION("4x RTX 8000 (go-gpuallocator New4xRTX8000Node)") {
    // NV2 bridges 0-3 and 1-2; same CPU 0-1 and 2-3; cross CPU 0-2 and 1-3.
    auto rows = troupe::parseMatrixText(R"([["X","NODE","SYS","NV2"],
                                            ["NODE","X","NV2","SYS"],
                                            ["SYS","NV2","X","NODE"],
                                            ["NV2","SYS","NODE","X"]])");
    REQUIRE(rows.isOk());
    auto t = troupe::model::topologyFromMatrix(rows.value(), 25.0, 32.0);
    REQUIRE(t.isOk());
    const GpuTopology& g = t.value();
    CHECK(g.size() == 4);
    CHECK(g.profile() == "annotation");
    CHECK(g.link(0, 3).kind == LinkKind::kNVLink);
    CHECK(g.link(3, 0).nvlinks == 2);
    CHECK(g.link(0, 3).bandwidth == Approx(50.0));
    CHECK(g.link(0, 1).kind == LinkKind::kSameNuma);
    CHECK(g.link(1, 3).kind == LinkKind::kCrossSocket);
    CHECK(g.link(0, 1).bandwidth > g.link(1, 3).bandwidth);
    REQUIRE(g.nvlinkDomains().size() == 2);
    CHECK(g.domainOf(0) == 0x9u);
    CHECK(g.domainOf(2) == 0x6u);
    CHECK(g.bestBottleneck(2) == Approx(50.0));
  }
  SECTION("bandwidth override NV18:450 and NVS default") {
    auto t = troupe::model::topologyFromMatrix(
        {{"X", "NV18:450", "NVS"}, {"NV18:450", "X", "PIX:12.5"}, {"NVS", "PIX:12.5", "X"}}, 25.0, 32.0);
    REQUIRE(t.isOk());
    CHECK(t.value().link(0, 1).kind == LinkKind::kNVLink);
    CHECK(t.value().link(0, 1).nvlinks == 18);
    CHECK(t.value().link(0, 1).bandwidth == Approx(450.0));
    CHECK(t.value().link(1, 2).kind == LinkKind::kPcieSwitch);
    CHECK(t.value().link(1, 2).bandwidth == Approx(12.5));
    CHECK(t.value().link(0, 2).kind == LinkKind::kNVSwitch);
    CHECK(t.value().link(0, 2).bandwidth == Approx(18 * 25.0));
    CHECK(t.value().nvlinkDomains().size() == 1);
    CHECK(t.value().maxBandwidth() == Approx(450.0));
  }
  SECTION("errors") {
    struct Bad {
      std::vector<std::vector<std::string>> rows;
      const char* fragment;
    };
    const Bad cases[] = {
        {{}, "1 to 64 rows"},
        {{{"X", "NV2"}, {"NV2"}}, "square"},
        {{{"X", "NV2", "PIX"}, {"NV2", "X", "PIX"}}, "square"},
        {{{"X", "FAST"}, {"FAST", "X"}}, "\"FAST\""},
        {{{"X", "X"}, {"X", "X"}}, "diagonal"},
        {{{"PIX", "PIX"}, {"PIX", "X"}}, "diagonal"},
        {{{"X", "NV2:fast"}, {"NV2:fast", "X"}}, "NV2:fast"},
    };
    for (const Bad& c : cases) {
      INFO("expect: " << c.fragment);
      auto t = troupe::model::topologyFromMatrix(c.rows, 25.0, 32.0);
      REQUIRE_FALSE(t.isOk());
      CHECK(t.status().code() == Code::kInvalidArgument);
      CHECK_THAT(t.status().message(), Catch::Contains(c.fragment));
    }
    auto off = troupe::model::topologyFromMatrix({{"X", "X"}, {"X", "X"}}, 25.0, 32.0);
    CHECK_THAT(off.status().message(), Catch::Contains("[0][1]"));
  }
}
