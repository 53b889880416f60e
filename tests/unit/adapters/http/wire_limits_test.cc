// The wire decoders' limits on hostile bodies (security review M1, C3): JSON nesting deeper
// than kMaxJsonDepth is a 400 naming the limit, in the streaming scanner (filter, prioritize)
// and in the DOM builder (bind, preempt, the Pod); answers with invalid UTF-8 in them encode
// instead of throwing on a reply path.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "adapters/http/json_scanner.h"
#include "adapters/http/wire.h"

namespace {

using troupe::http::kMaxJsonDepth;

// `arrays` nested arrays around a 1.
std::string arrays(size_t n) { return std::string(n, '[') + "1" + std::string(n, ']'); }

const std::string kPod =
    R"({"metadata":{"name":"p","namespace":"ml","uid":"u1"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}})";

bool namesTheLimit(const std::string& message) {
  return message.find("deeper than " + std::to_string(kMaxJsonDepth) + " levels") != std::string::npos;
}

}  // namespace

TEST_CASE("wire: nesting up to the limit decodes, one level more is refused naming the limit",
          "[wire][limits]") {
  // Each body is an object (level 1) with a member "x" holding the arrays.
  const size_t most = kMaxJsonDepth - 1;
  SECTION("bind (DOM builder)") {
    auto body = [](size_t n) {
      return R"({"x":)" + arrays(n) + R"(,"PodName":"p","PodNamespace":"ml","PodUID":"u1","Node":"n1"})";
    };
    CHECK(troupe::http::decodeBindingArgs(body(most)).isOk());
    auto refused = troupe::http::decodeBindingArgs(body(most + 1));
    REQUIRE_FALSE(refused.isOk());
    CHECK(namesTheLimit(refused.status().message()));
  }
  SECTION("preempt (DOM builder)") {
    auto body = [](size_t n) { return R"({"x":)" + arrays(n) + R"(,"Pod":)" + kPod + "}"; };
    CHECK(troupe::http::decodePreemptionArgs(body(most)).isOk());
    auto refused = troupe::http::decodePreemptionArgs(body(most + 1));
    REQUIRE_FALSE(refused.isOk());
    CHECK(namesTheLimit(refused.status().message()));
  }
  SECTION("filter: beside the Pod (scanner) and inside it (scanner, then DOM builder)") {
    auto beside = [](size_t n) {
      return R"({"x":)" + arrays(n) + R"(,"Pod":)" + kPod + R"(,"NodeNames":["n1"]})";
    };
    CHECK(troupe::http::decodeExtenderArgs(beside(most)).isOk());
    auto refused = troupe::http::decodeExtenderArgs(beside(most + 1));
    REQUIRE_FALSE(refused.isOk());
    CHECK(namesTheLimit(refused.status().message()));
    // Inside the Pod: Pod is level 2, metadata level 3, so 61 arrays more reach 64.
    auto inside = [](size_t n) {
      std::string pod = kPod;
      pod.insert(pod.find(R"("name":"p")"), R"("deep":)" + arrays(n) + ",");
      return R"({"Pod":)" + pod + R"(,"NodeNames":["n1"]})";
    };
    CHECK(troupe::http::decodeExtenderArgs(inside(kMaxJsonDepth - 3)).isOk());
    auto deep = troupe::http::decodeExtenderArgs(inside(kMaxJsonDepth - 2));
    REQUIRE_FALSE(deep.isOk());
    CHECK(namesTheLimit(deep.status().message()));
  }
  SECTION("an empty container at the limit counts") {
    const std::string body = R"({"x":)" + std::string(most + 1, '[') + std::string(most + 1, ']') +
                             R"(,"PodName":"p","PodNamespace":"ml","PodUID":"u1","Node":"n1"})";
    CHECK_FALSE(troupe::http::decodeBindingArgs(body).isOk());
    CHECK_FALSE(troupe::http::decodeExtenderArgs(R"({"x":)" + std::string(most + 1, '[') +
                                                 std::string(most + 1, ']') + R"(,"Pod":)" + kPod +
                                                 R"(,"NodeNames":["n1"]})")
                    .isOk());
  }
}

TEST_CASE("wire: ten million levels are refused at the limit, not parsed", "[wire][limits]") {
  const size_t depth = 10'000'000;
  const std::string body =
      R"({"x":)" + arrays(depth) + R"(,"PodName":"p","PodNamespace":"ml","PodUID":"u1","Node":"n"})";
  auto refused = troupe::http::decodeBindingArgs(body);
  REQUIRE_FALSE(refused.isOk());
  CHECK(namesTheLimit(refused.status().message()));
  auto filter = troupe::http::decodeExtenderArgs(R"({"Pod":)" + kPod + R"(,"x":)" + arrays(depth) + "}");
  REQUIRE_FALSE(filter.isOk());
  CHECK(namesTheLimit(filter.status().message()));
}

TEST_CASE("wire: answers carrying invalid UTF-8 are encoded, not thrown", "[wire][limits]") {
  // An API server's error body cut at byte 200 can end inside a UTF-8 sequence (review C3).
  const std::string cut = "pods \"p\" is forbidden: \xe2\x82";
  std::string bind;
  REQUIRE_NOTHROW(bind = troupe::http::encodeBindingResult(cut));
  auto parsed = nlohmann::json::parse(bind);
  CHECK(parsed["Error"].get<std::string>().rfind("pods \"p\" is forbidden: ", 0) == 0);
  REQUIRE_NOTHROW(nlohmann::json::parse(troupe::http::encodeHttpError("bad \xff byte")));
  REQUIRE_NOTHROW(nlohmann::json::parse(troupe::http::encodeFilterError("bad \xc0\xaf")));
}
