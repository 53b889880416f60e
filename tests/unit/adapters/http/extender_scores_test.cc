// The extender protocol's 0..10 prioritize scores, mapped from the core's per-node values.
#include "adapters/http/extender_scores.h"

#include <catch2/catch.hpp>

#include "troupe/sched/score/best_node.h"

namespace {

using troupe::http::extenderScores;
using troupe::http::HostScore;
using troupe::sched::HostValue;

std::vector<int64_t> scoresOf(const std::vector<HostScore>& scores) {
  std::vector<int64_t> out;
  for (const HostScore& s : scores) out.push_back(s.score);
  return out;
}

TEST_CASE("extender scores: the best node gets 10 alone, the rest spread over 0..9 by value",
          "[wire][prioritize]") {
  const auto scores = extenderScores({{"a", 0.2}, {"b", 0.9}, {"c", 0.55}, {"d", 0.2}});
  CHECK(scoresOf(scores) == std::vector<int64_t>{0, 10, 4, 0});
  CHECK(scores[1].host == "b");  // one per value, in the request's order
}

TEST_CASE("extender scores: unknown or unfit nodes get 0 and do not stretch the range",
          "[wire][prioritize]") {
  CHECK(scoresOf(extenderScores({{"a", -1}, {"b", 0.5}, {"c", 0.75}, {"d", -1}})) ==
        std::vector<int64_t>{0, 0, 10, 0});
  CHECK(scoresOf(extenderScores({{"a", -1}, {"b", -1}})) == std::vector<int64_t>{0, 0});
  CHECK(extenderScores({}).empty());
}

TEST_CASE("extender scores: among equal values the fixed node order picks the one 10", "[wire][prioritize]") {
  const std::vector<HostValue> values{{"n1", 0.5}, {"n2", 0.5}, {"n3", 0.5}};
  const auto scores = extenderScores(values);
  const std::string* first = &values[0].host;
  for (const HostValue& v : values) {
    if (troupe::sched::nodeTieRank(v.host) < troupe::sched::nodeTieRank(*first)) first = &v.host;
  }
  for (const HostScore& s : scores) CHECK(s.score == (s.host == *first ? 10 : 9));
}

TEST_CASE("extender scores: a planned gang member's slot wins outright", "[wire][prioritize]") {
  CHECK(scoresOf(extenderScores({{"x", -1}, {"slot", 1.0}, {"y", -1}})) == std::vector<int64_t>{0, 10, 0});
}

}  // namespace
