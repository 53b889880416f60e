// JsonScanner: the in-place JSON reader behind the extender request decoder. It must accept and
// reject exactly what the JSON library accepts, and decode strings to the library's bytes.
#include "adapters/http/json_scanner.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using troupe::http::JsonScanner;
using Json = nlohmann::ordered_json;

bool scannerAccepts(const std::string& text) {
  JsonScanner in(text);
  return in.skip() && in.finish();
}

// Values that are valid or invalid for the library, written as they would appear in a body.
const std::vector<std::string>& valueCorpus() {
  static const std::vector<std::string> corpus = {
      // literals and structure
      "true",
      "false",
      "null",
      "tru",
      "nul",
      "nulll",
      "truex",
      "True",
      "{}",
      "[]",
      "[ ]",
      "{ }",
      "[1,]",
      "[,1]",
      "{\"a\":1,}",
      "{,\"a\":1}",
      "{\"a\" 1}",
      "{\"a\":}",
      "{\"a\"}",
      "{1:2}",
      "[1 2]",
      "[1,,2]",
      "{\"a\":1 \"b\":2}",
      "[[[[]]]]",
      "[[[]]",
      "{\"a\":{\"b\":{\"c\":[1,{\"d\":null}]}}}",
      " \t\r\n[\n1\n]\r\n",
      "[1]]",
      "{}}",
      "[\"a\"\"b\"]",
      // numbers
      "0",
      "-0",
      "-",
      "01",
      "-01",
      "1.",
      ".5",
      "1.5",
      "-2.5e-3",
      "1e5",
      "1E+5",
      "1e",
      "1e+",
      "0.0e0",
      "1e400",
      "-1e400",
      "1e-400",
      "123456789012345678",
      "1234567890123456789",
      "12345678901234567890",
      "18446744073709551615",
      "18446744073709551616",
      "-9223372036854775808",
      "-9223372036854775809",
      std::string(400, '9'),
      "+1",
      "0x10",
      "1.5.5",
      "--1",
      "2e308",
      "1.7976931348623157e308",
      // strings
      "\"\"",
      "\"plain\"",
      "\"esc \\\" \\\\ \\/ \\b \\f \\n \\r \\t\"",
      "\"\\u00e9\\u65E5\"",
      "\"\\ud83d\\ude00\"",
      "\"\\ud83d\"",
      "\"\\ud83d\\u0041\"",
      "\"\\ude00\"",
      "\"\\u12\"",
      "\"\\u12g4\"",
      "\"\\x41\"",
      "\"\\'\"",
      "\"\\u0000\"",
      std::string("\"a\x01\""),
      std::string("\"tab\there\""),
      "\"del\x7f\"",
      "\"caf\xc3\xa9\"",
      "\"\xe6\x97\xa5\xe6\x9c\xac\"",
      "\"\xf0\x9f\x98\x80\"",
      "\"\xff\"",
      "\"\xc0\x80\"",
      "\"\xc1\xbf\"",
      "\"\xe0\x80\xaf\"",
      "\"\xed\xa0\x80\"",
      "\"\xf4\x90\x80\x80\"",
      "\"\xf5\x80\x80\x80\"",
      "\"\xc3\"",
      "\"\xe6\x97\"",
      "\"\x80\"",
      "\"unterminated",
      "\"a\\",
      "\"long string with no escapes at all, past 8 bytes\"",
      "\"long string that ends in an escape\\n\"",
      "\"12345678\\\"12345678\"",
      // containers around the hard cases, where the fast paths meet the slow ones
      "{\"k\\u0041\":\"v\",\"k\\u0041\":[\"\\ud83d\\ude00\",-0.5e-7]}",
      "[\"\xe2\x82\xac\",{\"\xe2\x82\xac\":1}]",
      // whitespace the library does not allow
      "[1,\f2]",
      "[1,\v2]",
      std::string("[1,\xc2\xa0"
                  "2]"),
  };
  return corpus;
}

}  // namespace

TEST_CASE("json scanner: accepts exactly what the JSON library accepts", "[wire][json]") {
  for (const std::string& value : valueCorpus()) {
    // On its own, inside an array and as an object member, so every reader path meets it.
    for (const std::string& text : {value, "[" + value + "]", "{\"k\":" + value + ",\"z\":[true]}",
                                    "{\"deep\":[{\"a\":[" + value + "]}]}"}) {
      INFO("text: " << text);
      CHECK(scannerAccepts(text) == Json::accept(text));
    }
  }
}

TEST_CASE("json scanner: the input's edges as the library reads them", "[wire][json]") {
  const std::string bom = "\xef\xbb\xbf";
  for (const std::string& text : std::vector<std::string>{
           bom + "{}",
           bom + " [1]",
           std::string("\xef\xbb") + "{}",
           std::string("\xef") + "{}",
           "{} " + bom,                            // a BOM only counts at the start
           std::string("{\"a\":1}\0garbage", 15),  // NUL ends the input
           std::string("{\"a\":1}  \0", 10),
           std::string("{\"a\":\0}", 7),
           std::string("\0{}", 3),
           "",
           "   ",
           "{} {}",
           "{}x",
           "[1] 2",
           "{}\n\t ",
       }) {
    INFO("text: " << Json(text).dump(-1, ' ', true, Json::error_handler_t::replace));
    CHECK(scannerAccepts(text) == Json::accept(text));
  }
}

TEST_CASE("json scanner: nesting deeper than the limit is refused, and says so", "[wire][json]") {
  using troupe::http::kMaxJsonDepth;
  // The outermost object is level 1: kMaxJsonDepth - 1 arrays inside it is the most allowed.
  auto nested = [](size_t arrays, bool empty) {
    return "{\"x\":" + std::string(arrays, '[') + (empty ? "" : "1") + std::string(arrays, ']') + ",\"y\":1}";
  };
  for (bool empty : {false, true}) {
    CHECK(scannerAccepts(nested(kMaxJsonDepth - 1, empty)));
    const std::string too_deep = nested(kMaxJsonDepth, empty);
    JsonScanner in(too_deep);
    CHECK_FALSE(in.skip());
    CHECK(in.tooDeep());
  }
  // The same through enterObject/enterArray.
  const std::string opens(kMaxJsonDepth + 1, '[');
  JsonScanner walk(opens);
  size_t entered = 0;
  while (walk.enterArray()) ++entered;
  CHECK(entered == kMaxJsonDepth);
  CHECK(walk.tooDeep());
  // 200,000 levels stop at the limit (no recursion, no state per level past it); a malformed
  // body is not reported as too deep.
  const size_t depth = 200000;
  const std::string deep_text = "{\"x\":" + std::string(depth, '[') + std::string(depth, ']') + ",\"y\":1}";
  JsonScanner deep(deep_text);
  CHECK_FALSE(deep.skip());
  CHECK(deep.tooDeep());
  const std::string unbalanced_text = "{\"x\":[[1]}";
  JsonScanner unbalanced(unbalanced_text);
  CHECK_FALSE(unbalanced.skip());
  CHECK_FALSE(unbalanced.tooDeep());
}

TEST_CASE("json scanner: strings decode to the library's bytes", "[wire][json]") {
  for (const std::string& literal : {
           std::string("\"plain\""),
           std::string("\"\""),
           std::string("\"esc \\\" \\\\ \\/ \\b \\f \\n \\r \\t end\""),
           std::string("\"\\u00e9\\u65E5\\u0041\\u0000x\""),
           std::string("\"\\ud83d\\ude00 and \\uD834\\uDD1E\""),
           std::string("\"caf\xc3\xa9 \xf0\x9f\x98\x80 raw\""),
           std::string("\"a long run of plain text, then \\n\""),
       }) {
    INFO("literal: " << literal);
    JsonScanner in(literal);
    std::string_view got;
    std::string scratch;
    REQUIRE(in.readString(&got, &scratch));
    CHECK(in.finish());
    CHECK(std::string(got) == Json::parse(literal).get<std::string>());
  }
  JsonScanner number("12");
  std::string_view got;
  std::string scratch;
  CHECK_FALSE(number.readString(&got, &scratch));
  CHECK_FALSE(number.ok());
}

TEST_CASE("json scanner: objects and arrays member by member, with spans", "[wire][json]") {
  const std::string text = R"( { "a" : [ 1 , "two" , {"t":true} ] , "b\u0041" : null , "c":{} } )";
  JsonScanner in(text);
  REQUIRE(in.enterObject());
  std::string_view key;
  std::string scratch;
  std::vector<std::string> keys, spans;
  while (in.nextKey(&key, &scratch)) {
    keys.emplace_back(key);
    if (key == "a") {
      REQUIRE(in.enterArray());
      while (in.nextItem()) {
        in.peek();
        const size_t start = in.pos();
        REQUIRE(in.skip());
        spans.emplace_back(text.substr(start, in.pos() - start));
      }
    } else {
      REQUIRE(in.skip());
    }
  }
  CHECK(in.ok());
  CHECK(in.finish());
  CHECK(keys == std::vector<std::string>{"a", "bA", "c"});
  CHECK(spans == std::vector<std::string>{"1", "\"two\"", "{\"t\":true}"});

  for (const char* bad_text : {R"({"a":1,})", R"({"a":1 "b":2})", R"({"a" 1})", R"([1,])", R"([1 2])"}) {
    const std::string bad = bad_text;
    INFO(bad);
    JsonScanner b(bad);
    if (bad[0] == '{') {
      REQUIRE(b.enterObject());
      while (b.nextKey(&key, &scratch)) {
        if (!b.skip()) break;
      }
    } else {
      REQUIRE(b.enterArray());
      while (b.nextItem()) {
        if (!b.skip()) break;
      }
    }
    CHECK((!b.ok() || !b.finish()));
  }
}
