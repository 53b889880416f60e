#include "adapters/http/json_scanner.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace troupe::http {
namespace {

constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHigh = 0x8080808080808080ULL;

// Whether any of the 8 bytes in `v` is a quote, a backslash, a control character or not
// ASCII: the bytes that end a string's fast path. (Classic SWAR tests; each is exact about
// whether such a byte is present.)
bool hasSpecialByte(uint64_t v) {
  auto zero = [](uint64_t x) { return (x - kOnes) & ~x & kHigh; };
  const uint64_t quote = zero(v ^ (kOnes * '"'));
  const uint64_t backslash = zero(v ^ (kOnes * '\\'));
  const uint64_t control = (v - kOnes * 0x20) & ~v & kHigh;
  return (quote | backslash | control | (v & kHigh)) != 0;
}

bool isDigit(char c) { return c >= '0' && c <= '9'; }

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The length of the valid UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF) starting with the non-ASCII byte at p, or 0 when it is not one.
size_t utf8Length(const unsigned char* p, const unsigned char* end) {
  auto in = [&](size_t i, unsigned lo, unsigned hi) { return p + i < end && p[i] >= lo && p[i] <= hi; };
  const unsigned c = p[0];
  if (c >= 0xC2 && c <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
  if (c == 0xE0) return in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
    return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xED) return in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF) ? 3 : 0;
  if (c == 0xF0) return in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  if (c == 0xF4) return in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  return 0;
}

void appendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

JsonScanner::JsonScanner(std::string_view text)
    : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()) {
  // The library skips a UTF-8 byte order mark at the start and rejects a partial one.
  if (p_ < end_ && static_cast<unsigned char>(*p_) == 0xEF) {
    if (end_ - p_ >= 3 && static_cast<unsigned char>(p_[1]) == 0xBB &&
        static_cast<unsigned char>(p_[2]) == 0xBF) {
      p_ += 3;
    } else {
      fail();
    }
  }
}

bool JsonScanner::fail() {
  ok_ = false;
  return false;
}

bool JsonScanner::failTooDeep() {
  too_deep_ = true;
  return fail();
}

void JsonScanner::skipWhitespace() {
  while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
}

char JsonScanner::peek() {
  if (!ok_) return '\0';
  skipWhitespace();
  return cur();
}

bool JsonScanner::scanString(std::string* decoded) {
  ++p_;                  // the opening quote
  const char* run = p_;  // start of the bytes not yet copied into `decoded`
  for (;;) {
    uint64_t chunk;
    while (end_ - p_ >= 8) {
      std::memcpy(&chunk, p_, 8);
      if (hasSpecialByte(chunk)) break;
      p_ += 8;
    }
    if (p_ >= end_) return fail();  // no closing quote
    const auto c = static_cast<unsigned char>(*p_);
    if (c == '"') {
      if (decoded) decoded->append(run, p_);
      ++p_;
      return true;
    }
    if (c < 0x20) return fail();  // control characters must be escaped
    if (c < 0x80 && c != '\\') {
      ++p_;
      continue;
    }
    if (c >= 0x80) {
      const size_t n = utf8Length(reinterpret_cast<const unsigned char*>(p_),
                                  reinterpret_cast<const unsigned char*>(end_));
      if (n == 0) return fail();
      p_ += n;
      continue;
    }
    // A backslash escape.
    escaped_ = true;
    if (decoded) decoded->append(run, p_);
    ++p_;
    if (p_ >= end_) return fail();
    const char e = *p_++;
    char simple = '\0';
    switch (e) {
      case '"': simple = '"'; break;
      case '\\': simple = '\\'; break;
      case '/': simple = '/'; break;
      case 'b': simple = '\b'; break;
      case 'f': simple = '\f'; break;
      case 'n': simple = '\n'; break;
      case 'r': simple = '\r'; break;
      case 't': simple = '\t'; break;
      case 'u': {
        auto hex4 = [&]() -> int {
          if (end_ - p_ < 4) return -1;
          int v = 0;
          for (int i = 0; i < 4; ++i) {
            const int d = hexDigit(p_[i]);
            if (d < 0) return -1;
            v = v * 16 + d;
          }
          p_ += 4;
          return v;
        };
        int cp = hex4();
        if (cp < 0) return fail();
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          // A high surrogate must be followed by an escaped low one.
          if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return fail();
          p_ += 2;
          const int low = hex4();
          if (low < 0xDC00 || low > 0xDFFF) return fail();
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return fail();
        }
        if (decoded) appendUtf8(decoded, static_cast<uint32_t>(cp));
        break;
      }
      default: return fail();
    }
    if (simple != '\0' && decoded) decoded->push_back(simple);
    run = p_;
  }
}

bool JsonScanner::scanNumber() {
  const char* start = p_;
  bool integer = true;
  if (cur() == '-') ++p_;
  if (cur() == '0') {
    ++p_;
  } else if (cur() >= '1' && cur() <= '9') {
    while (isDigit(cur())) ++p_;
  } else {
    return fail();
  }
  if (cur() == '.') {
    integer = false;
    ++p_;
    if (!isDigit(cur())) return fail();
    while (isDigit(cur())) ++p_;
  }
  if (cur() == 'e' || cur() == 'E') {
    integer = false;
    ++p_;
    if (cur() == '+' || cur() == '-') ++p_;
    if (!isDigit(cur())) return fail();
    while (isDigit(cur())) ++p_;
  }
  const auto digits = static_cast<size_t>(p_ - start) - (*start == '-' ? 1 : 0);
  if (integer && digits <= 18) return true;  // fits a 64-bit integer
  // The library keeps what fits a 64-bit integer and reads anything else as a double, which
  // must be finite (1e400 is an error there).
  const std::string token(start, p_);
  return std::isfinite(std::strtod(token.c_str(), nullptr)) ? true : fail();
}

bool JsonScanner::scanLiteral(std::string_view word) {
  if (static_cast<size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0) {
    return fail();
  }
  p_ += word.size();
  return true;
}

bool JsonScanner::scanScalar() {
  switch (cur()) {
    case '"': return scanString(nullptr);
    case 't': return scanLiteral("true");
    case 'f': return scanLiteral("false");
    case 'n': return scanLiteral("null");
    default: return scanNumber();
  }
}

bool JsonScanner::readString(std::string_view* out, std::string* scratch) {
  if (peek() != '"') return fail();
  const char* start = p_;
  escaped_ = false;
  if (!scanString(nullptr)) return false;
  if (!escaped_) {
    *out = std::string_view(start + 1, static_cast<size_t>(p_ - start - 2));
    return true;
  }
  // Rare: decode on a second pass.
  const char* after = p_;
  p_ = start;
  scratch->clear();
  scanString(scratch);
  p_ = after;
  *out = *scratch;
  return true;
}

bool JsonScanner::skip() {
  if (!ok_) return false;
  skip_stack_.clear();
  for (;;) {
    // A value is expected here.
    skipWhitespace();
    const char c = cur();
    if (c == '{' || c == '[') {
      if (depth() >= kMaxJsonDepth) return failTooDeep();  // an empty one counts too
      ++p_;
      skipWhitespace();
      if (cur() == (c == '{' ? '}' : ']')) {
        ++p_;
      } else {
        skip_stack_.push_back(c == '{' ? 'o' : 'a');
        if (c == '{') {
          if (cur() != '"' || !scanString(nullptr)) return fail();
          skipWhitespace();
          if (cur() != ':') return fail();
          ++p_;
        }
        continue;
      }
    } else if (!scanScalar()) {
      return fail();
    }
    // After a value: close containers, or go on to the next member.
    for (;;) {
      if (skip_stack_.empty()) return true;
      skipWhitespace();
      const bool object = skip_stack_.back() == 'o';
      if (cur() == ',') {
        ++p_;
        if (object) {
          skipWhitespace();
          if (cur() != '"' || !scanString(nullptr)) return fail();
          skipWhitespace();
          if (cur() != ':') return fail();
          ++p_;
        }
        break;
      }
      if (cur() != (object ? '}' : ']')) return fail();
      ++p_;
      skip_stack_.pop_back();
    }
  }
}

bool JsonScanner::enterObject() {
  if (peek() != '{') return fail();
  if (depth() >= kMaxJsonDepth) return failTooDeep();
  ++p_;
  open_.push_back('F');
  return true;
}

bool JsonScanner::enterArray() {
  if (peek() != '[') return fail();
  if (depth() >= kMaxJsonDepth) return failTooDeep();
  ++p_;
  open_.push_back('F');
  return true;
}

bool JsonScanner::nextMember(char close) {
  if (!ok_ || open_.empty()) return fail();
  skipWhitespace();
  if (cur() == close) {
    ++p_;
    open_.pop_back();
    return false;
  }
  if (open_.back() == 'N') {
    if (cur() != ',') return fail();
    ++p_;
  }
  open_.back() = 'N';
  return true;
}

bool JsonScanner::nextKey(std::string_view* key, std::string* scratch) {
  if (!nextMember('}')) return false;
  if (peek() != '"' || !readString(key, scratch)) return fail();
  skipWhitespace();
  if (cur() != ':') return fail();
  ++p_;
  return true;
}

bool JsonScanner::nextItem() { return nextMember(']'); }

bool JsonScanner::finish() {
  if (!ok_ || !open_.empty()) return false;
  skipWhitespace();
  return p_ == end_ || *p_ == '\0';
}

}  // namespace troupe::http
