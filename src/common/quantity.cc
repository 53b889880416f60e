#include "troupe/common/quantity.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <string>

namespace troupe {
namespace {

struct Suffix {
  std::string_view text;
  int base;      // 2 or 10
  int exponent;  // power of base
};

// Binary and decimal SI suffixes as Kubernetes accepts them.
constexpr Suffix kSuffixes[] = {
    {"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60},
    {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"", 10, 0},   {"k", 10, 3},  {"M", 10, 6},
    {"G", 10, 9},  {"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18},
};

Status badQuantity(std::string_view text, std::string_view why) {
  return invalidArgument("\"" + std::string(text) + "\" is not a Kubernetes quantity (" + std::string(why) +
                         "); expected a number with an optional suffix, " +
                         "e.g. \"8\", \"500m\" or \"40Gi\"");
}

// Parses into a long double scaled by `scale`, then rounds up. long double keeps 64 bits of
// mantissa, enough for every quantity that fits in int64 after scaling.
Result<int64_t> parseScaled(std::string_view text, long double scale) {
  if (text.empty()) return badQuantity(text, "empty");
  size_t pos = 0;
  bool negative = false;
  if (text[pos] == '+' || text[pos] == '-') {
    negative = text[pos] == '-';
    ++pos;
  }
  size_t digits_start = pos;
  while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.')) {
    ++pos;
  }
  std::string_view number = text.substr(digits_start, pos - digits_start);
  if (number.empty() || number == ".") return badQuantity(text, "no digits");
  if (number.find('.') != number.rfind('.')) return badQuantity(text, "two decimal points");
  std::string_view rest = text.substr(pos);

  long double multiplier = 1;
  if (!rest.empty() && (rest[0] == 'e' || rest[0] == 'E') && rest.size() > 1 &&
      (std::isdigit(static_cast<unsigned char>(rest[1])) || rest[1] == '-' || rest[1] == '+')) {
    std::string exp(rest.substr(1));
    size_t used = 0;
    int e = 0;
    try {
      e = std::stoi(exp, &used);
    } catch (...) {
      return badQuantity(text, "bad exponent");
    }
    if (used != exp.size() || e > 30 || e < -30) return badQuantity(text, "bad exponent");
    multiplier = std::pow(10.0L, e);
  } else {
    bool found = false;
    for (const Suffix& s : kSuffixes) {
      if (rest == s.text) {
        multiplier = std::pow(static_cast<long double>(s.base), s.exponent);
        found = true;
        break;
      }
    }
    if (!found) return badQuantity(text, "unknown suffix \"" + std::string(rest) + "\"");
  }
  long double value = std::strtold(std::string(number).c_str(), nullptr) * multiplier * scale;
  if (negative) value = -value;
  long double rounded = std::ceil(value - 1e-9L);  // absorb float noise such as 0.1*3
  if (rounded > static_cast<long double>(std::numeric_limits<int64_t>::max()) ||
      rounded < static_cast<long double>(std::numeric_limits<int64_t>::min())) {
    return badQuantity(text, "too large");
  }
  return static_cast<int64_t>(rounded);
}

}  // namespace

Result<int64_t> parseQuantityMilli(std::string_view text) { return parseScaled(text, 1000); }
Result<int64_t> parseQuantityValue(std::string_view text) { return parseScaled(text, 1); }

}  // namespace troupe
