// Kubernetes quantities: parseQuantityMilli / parseQuantityValue.
#include "troupe/common/quantity.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

namespace {

using troupe::Code;
using troupe::parseQuantityMilli;
using troupe::parseQuantityValue;

struct GoodCase {
  const char* text;
  int64_t milli;
  int64_t value;
};

}  // namespace

TEST_CASE("quantity: well-formed values parse to milli and value", "[quantity]") {
  const GoodCase cases[] = {
      {"8", 8000, 8},
      {"0", 0, 0},
      {"500m", 500, 1},  // Value() rounds up
      {"1500m", 1500, 2},
      {"1", 1000, 1},
      {"40Gi", 42949672960000LL, 42949672960LL},
      {"1.5", 1500, 2},
      {"0.1", 100, 1},
      {"0.3", 300, 1},  // no float noise: 0.3 * 1000 must be 300, not 301
      {"2e3", 2000000, 2000},
      {"2E3", 2000000, 2000},
      {"1e-3", 1, 1},
      {"1Ki", 1024000, 1024},
      {"1Mi", 1048576000LL, 1048576},
      {"1.5Gi", 1610612736000LL, 1610612736LL},
      {"2k", 2000000, 2000},
      {"3M", 3000000000LL, 3000000},
      {"1G", 1000000000000LL, 1000000000},
      {"81559", 81559000, 81559},
      {"191450m", 191450, 192},
      {"2100825308Ki", 2151245115392000LL, 2151245115392LL},
      {"100u", 1, 1},  // 0.0001 -> rounded up to 1 milli
      {"+4", 4000, 4},
      {"-1", -1000, -1},
      {"1E", 0, 1000000000000000000LL},  // "E" is the exa suffix, not an exponent
  };
  for (const GoodCase& c : cases) {
    INFO("text=\"" << c.text << "\"");
    auto v = parseQuantityValue(c.text);
    REQUIRE(v.isOk());
    CHECK(v.value() == c.value);
    if (std::string(c.text) == "1E") continue;  // milli of 1E overflows, see below
    auto m = parseQuantityMilli(c.text);
    REQUIRE(m.isOk());
    CHECK(m.value() == c.milli);
  }
}

TEST_CASE("quantity: bad inputs are InvalidArgument naming the value", "[quantity]") {
  struct BadCase {
    const char* text;
    const char* why;  // a fragment of the explanation
  };
  const BadCase cases[] = {
      {"lots", "no digits"},
      {"", "empty"},
      {"1.2.3", "two decimal points"},
      {"5Xi", "unknown suffix \"Xi\""},
      {"5 Gi", "unknown suffix"},
      {".", "no digits"},
      {"m", "no digits"},
      {"-", "no digits"},
      {"1e", "unknown suffix"},
      {"1e99", "bad exponent"},
      {"1e3x", "bad exponent"},
      {"8gi", "unknown suffix"},
      {"10E", "too large"},  // 10^19 milli... and as milli far beyond int64
  };
  for (const BadCase& c : cases) {
    INFO("text=\"" << c.text << "\"");
    auto m = parseQuantityMilli(c.text);
    REQUIRE_FALSE(m.isOk());
    CHECK(m.status().code() == Code::kInvalidArgument);
    CHECK_THAT(m.status().message(), Catch::Contains("\"" + std::string(c.text) + "\""));
    CHECK_THAT(m.status().message(), Catch::Contains(c.why));
  }
  // The same inputs fail as values too (except overflow, which depends on the scale).
  for (const char* text : {"lots", "", "1.2.3", "5Xi"}) {
    INFO("text=\"" << text << "\"");
    auto v = parseQuantityValue(text);
    REQUIRE_FALSE(v.isOk());
    CHECK(v.status().code() == Code::kInvalidArgument);
    CHECK_THAT(v.status().message(), Catch::Contains("\"" + std::string(text) + "\""));
  }
}

TEST_CASE("quantity: overflow is an error, not a wrapped number", "[quantity]") {
  // 1E (10^18) fits int64 as a value, but not in thousandths.
  auto m = parseQuantityMilli("1E");
  REQUIRE_FALSE(m.isOk());
  CHECK_THAT(m.status().message(), Catch::Contains("too large"));
  auto v = parseQuantityValue("100E");
  REQUIRE_FALSE(v.isOk());
  CHECK_THAT(v.status().message(), Catch::Contains("\"100E\""));
}
