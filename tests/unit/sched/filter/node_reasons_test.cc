// NodeReasons: FailedNodes / FailedAndUnresolvableNodes as a flat list with shared reasons.
#include "troupe/sched/filter/node_reasons.h"

#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using troupe::sched::NodeReasons;

TEST_CASE("node reasons: keeps rejection order, stores each reason once, reads like a map",
          "[scheduler][node-reasons]") {
  NodeReasons r;
  CHECK(r.empty());
  const NodeReasons::ReasonId busy = r.intern("busy");
  r.add("c", busy);
  r.add("a", "never");
  r.add("b", std::string("busy"));  // equal text: the same stored reason
  r.add("d", busy);
  CHECK(r.size() == 4);
  CHECK(r.reasons() == std::vector<std::string>{"busy", "never"});
  CHECK(r.intern("never") == 1);

  std::vector<std::pair<std::string, std::string>> seen;
  for (const auto& [node, why] : r) seen.emplace_back(node, why);
  CHECK(seen == std::vector<std::pair<std::string, std::string>>{
                    {"c", "busy"}, {"a", "never"}, {"b", "busy"}, {"d", "busy"}});
  CHECK(r.begin()->first == "c");
  CHECK(r.begin()->second == "busy");

  CHECK(r.contains("a"));
  CHECK_FALSE(r.contains("z"));
  CHECK(r.at("d") == "busy");
  try {
    (void)r.at("z");
    FAIL("at() of a node that was not rejected must throw");
  } catch (const std::out_of_range& e) {
    CHECK(std::string(e.what()).find("node z") != std::string::npos);
  }

  // A broken node's own reason replaces the generic one; other nodes keep theirs.
  CHECK(r.reword("b", "troupe: bad label"));
  CHECK(r.at("b") == "troupe: bad label");
  CHECK(r.at("c") == "busy");
  CHECK_FALSE(r.reword("z", "x"));

  NodeReasons all;
  all.addAll({"x", "y", "z"}, "gang elsewhere");
  CHECK(all.size() == 3);
  CHECK(all.reasons().size() == 1);
  CHECK(all.at("y") == "gang elsewhere");
  all.clear();
  CHECK(all.empty());
  CHECK(all.reasons().empty());
}

TEST_CASE("node reasons: many distinct reasons still intern in bounded time and read back right",
          "[scheduler][node-reasons]") {
  NodeReasons r;
  for (int i = 0; i < 2000; ++i) r.add("n" + std::to_string(i), "reason " + std::to_string(i % 50));
  REQUIRE(r.size() == 2000);
  for (int i = 0; i < 2000; i += 37)
    CHECK(r.at("n" + std::to_string(i)) == "reason " + std::to_string(i % 50));
  // Far more reasons are kept than the 50 distinct texts (the look-back is bounded), but far
  // fewer than one per node would be when they repeat within it.
  NodeReasons few;
  for (int i = 0; i < 2000; ++i) few.add("n" + std::to_string(i), "reason " + std::to_string(i % 4));
  CHECK(few.reasons().size() == 4);
}
