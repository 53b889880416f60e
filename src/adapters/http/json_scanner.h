// A strict JSON reader that works in place on the request bytes: it validates as it goes and
// hands out strings (decoded only when they hold escapes) and the byte span of any value,
// without building a document. For the large extender requests, where building nlohmann's
// DOM, freeing it and dumping the node objects again cost most of the handling time.
//
// It accepts and rejects exactly what nlohmann::json's parser (strict mode) does: RFC 8259
// syntax, UTF-8 checked inside strings, \u escapes with paired surrogates, numbers that are
// finite doubles when they do not fit a 64-bit integer, an optional UTF-8 BOM at the start,
// and, like the library, a NUL byte after the value ends the input. One addition: objects and
// arrays may nest at most kMaxJsonDepth deep (tooDeep() tells that this was the failure).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace troupe::http {

// How deep objects and arrays may nest in a request body (the outermost object is level 1).
// Kubernetes objects need a few dozen levels at most; without a limit a 20 MB body of nested
// arrays made ~900 MB of parser state (security review M1).
inline constexpr size_t kMaxJsonDepth = 64;

class JsonScanner {
 public:
  explicit JsonScanner(std::string_view text);

  // False once anything invalid was met; every call after that fails too.
  bool ok() const { return ok_; }
  // The failure was nesting deeper than kMaxJsonDepth.
  bool tooDeep() const { return too_deep_; }
  size_t pos() const { return static_cast<size_t>(p_ - begin_); }
  std::string_view text() const { return {begin_, static_cast<size_t>(end_ - begin_)}; }

  // The first byte of the next value after whitespace ('{', '[', '"', 't', 'f', 'n', '-' or a
  // digit), without consuming it; 0 at the end of the input.
  char peek();

  // A string value, decoded: a view into the input when it has no escapes, else into
  // `scratch`. Fails when the next value is not a string.
  bool readString(std::string_view* out, std::string* scratch);
  // Any value, validated and passed over.
  bool skip();

  // Objects: enterObject() consumes '{'; then each nextKey() reads the next member's key and
  // its ':' (the caller then reads or skips the value), and returns false at the closing '}'
  // (consumed) or on an error (see ok()).
  bool enterObject();
  bool nextKey(std::string_view* key, std::string* scratch);
  // Arrays, the same way: nextItem() is true when a value follows.
  bool enterArray();
  bool nextItem();

  // True when nothing but whitespace (or a NUL byte and anything after it) is left.
  bool finish();

 private:
  bool fail();
  bool failTooDeep();
  size_t depth() const { return open_.size() + skip_stack_.size(); }
  void skipWhitespace();
  char cur() const { return p_ < end_ ? *p_ : '\0'; }
  bool scanString(std::string* decoded);  // at the opening quote; decoded may be null
  bool scanNumber();
  bool scanLiteral(std::string_view word);
  bool scanScalar();  // string, number or literal at p_
  // The step shared by nextKey and nextItem: consumes `close` (and closes the container) or the
  // ',' before every member but the first. True when a member follows; false at the end or on
  // an error (ok_ tells which).
  bool nextMember(char close);

  const char* begin_;
  const char* p_;
  const char* end_;
  bool ok_ = true;
  bool too_deep_ = false;
  bool escaped_ = false;  // the last scanned string had a backslash escape
  // Containers opened by enterObject/enterArray, innermost last: 'F' while the next member
  // would be the first, 'N' after that.
  std::string open_;
  std::string skip_stack_;  // containers open inside skip(): 'o' or 'a'
};

}  // namespace troupe::http
