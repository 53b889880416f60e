// The HTTP server's limits in --config (limits:), and the bounds of maxBodyBytes.
#include <catch2/catch.hpp>

#include "adapters/yaml/config.h"

namespace config = troupe::config;

TEST_CASE("config: limits default to the documented values", "[config][limits]") {
  auto c = config::parseServeConfig("listen: 127.0.0.1:1\n", "t.yaml");
  REQUIRE(c.isOk());
  const config::ServerLimitsConfig& l = c.value().limits;
  CHECK(l.max_header_bytes == 65536);
  CHECK(l.max_body_bytes_in_flight == 134217728);
  CHECK(l.max_connections == 1024);
  CHECK(l.header_timeout_seconds == 10);
  CHECK(l.read_timeout_seconds == 60);
  CHECK(l.idle_timeout_seconds == 120);
  CHECK(l.write_timeout_seconds == 60);
  CHECK(c.value().max_body_bytes == 64u << 20);
}

TEST_CASE("config: every limit can be set", "[config][limits]") {
  auto c = config::parseServeConfig(
      "limits:\n  maxHeaderBytes: 8192\n  maxBodyBytesInFlight: 1048576\n  maxConnections: 16\n"
      "  headerTimeoutSeconds: 2.5\n  readTimeoutSeconds: 30\n  idleTimeoutSeconds: 95\n"
      "  writeTimeoutSeconds: 15\n",
      "t.yaml");
  REQUIRE(c.isOk());
  const config::ServerLimitsConfig& l = c.value().limits;
  CHECK(l.max_header_bytes == 8192);
  CHECK(l.max_body_bytes_in_flight == 1048576);
  CHECK(l.max_connections == 16);
  CHECK(l.header_timeout_seconds == 2.5);
  CHECK(l.read_timeout_seconds == 30);
  CHECK(l.idle_timeout_seconds == 95);
  CHECK(l.write_timeout_seconds == 15);
}

TEST_CASE("config: bad limits are errors naming file, line and key", "[config][limits]") {
  struct Bad {
    const char* yaml;
    const char* message;
  };
  for (const Bad& b : {
           Bad{"limits:\n  maxHeaderBytes: 100\n", "t.yaml:2: limits.maxHeaderBytes: must be at least 1024"},
           Bad{"limits:\n  maxConnections: 0\n", "t.yaml:2: limits.maxConnections: must be at least 1"},
           Bad{"limits:\n  maxConnections: many\n",
               "t.yaml:2: limits.maxConnections: must be a whole number"},
           Bad{"limits:\n  headerTimeoutSeconds: 0\n",
               "t.yaml:2: limits.headerTimeoutSeconds: must be between 0.1 and 86400 seconds"},
           Bad{"limits:\n  idleTimeoutSeconds: -5\n",
               "t.yaml:2: limits.idleTimeoutSeconds: must be between 0.1 and 86400 seconds"},
           Bad{"limits:\n  readTimeout: 5\n", "t.yaml:2: limits.readTimeout: unknown key; expected one of"},
           Bad{"maxBodyBytes: 2147483648\n", "t.yaml:1: maxBodyBytes: must be at most 1073741824 (1 GiB)"},
       }) {
    auto c = config::parseServeConfig(b.yaml, "t.yaml");
    INFO(b.yaml);
    REQUIRE_FALSE(c.isOk());
    CHECK_THAT(c.status().message(), Catch::StartsWith(b.message));
  }
}
