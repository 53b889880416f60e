// The bundled example trace (examples/trace/), parsed, for the tests that replay it.
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "troupe/sim/trace.h"

namespace troupe::testing {

struct ExampleTrace {
  std::vector<sim::TraceNode> nodes;
  std::vector<sim::TracePod> pods;
};

inline ExampleTrace exampleTrace() {
  const std::string dir = sourceDir() + "/examples/trace/";
  auto node_text = readFile(dir + "nodes.csv");
  auto pod_text = readFile(dir + "pods.csv");
  REQUIRE(node_text);
  REQUIRE(pod_text);
  auto nodes = sim::parseNodeCsv(*node_text, "nodes.csv");
  auto pods = sim::parsePodCsv(*pod_text, "pods.csv");
  REQUIRE(nodes.isOk());
  REQUIRE(pods.isOk());
  return {std::move(nodes).value(), std::move(pods).value()};
}

}  // namespace troupe::testing
