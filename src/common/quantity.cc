#include "troupe/common/quantity.h"

#include <algorithm>
#include <cctype>
#include <charconv>
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

// Parses into a long double scaled by 10^`scale_exp10`, then rounds up. long double keeps 64
// bits of mantissa on x86-64, enough for every quantity that fits in int64 after scaling; where
// it is only a double, large values lose their last digits but the range check stays exact.
// Powers of ten are applied as one exact 10^k (k <= 27), dividing for negative k, so that
// "72057594037927936m" in thousandths is exactly 72057594037927936 (0.001 has no exact binary
// form: multiplying by it and then by 1000 came out one too high at that size).
Result<int64_t> parseScaled(std::string_view text, int scale_exp10) {
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

  int exp2 = 0;             // the suffix's power of two
  int exp10 = scale_exp10;  // the suffix's or exponent's power of ten, plus the scale's
  if (!rest.empty() && (rest[0] == 'e' || rest[0] == 'E') && rest.size() > 1 &&
      (std::isdigit(static_cast<unsigned char>(rest[1])) || rest[1] == '-' || rest[1] == '+')) {
    // A sign, then digits (std::from_chars takes '-' but not '+'); range-checked, never thrown.
    std::string_view exp = rest.substr(1);
    const bool plus = exp[0] == '+';
    if (plus) exp.remove_prefix(1);
    int e = 0;
    const auto [end, ec] = std::from_chars(exp.data(), exp.data() + exp.size(), e);
    if (exp.empty() || (plus && exp[0] == '-') || ec != std::errc() || end != exp.data() + exp.size() ||
        e > 30 || e < -30) {
      return badQuantity(text, "bad exponent");
    }
    exp10 += e;
  } else {
    bool found = false;
    for (const Suffix& s : kSuffixes) {
      if (rest == s.text) {
        (s.base == 2 ? exp2 : exp10) += s.exponent;
        found = true;
        break;
      }
    }
    if (!found) return badQuantity(text, "unknown suffix \"" + std::string(rest) + "\"");
  }
  // std::from_chars: locale-independent and non-throwing (400 digits are just a large value).
  long double mantissa = 0;
  const auto [end, ec] =
      std::from_chars(number.data(), number.data() + number.size(), mantissa, std::chars_format::fixed);
  if (end != number.data() + number.size()) return badQuantity(text, "not a number");
  if (ec == std::errc::result_out_of_range) {
    // Huge, or a fraction so small it underflows; the second rounds up like any other fraction.
    if (number.find_first_of("123456789") < std::min(number.find('.'), number.size())) {
      return badQuantity(text, "too large");
    }
    mantissa = 0;
  } else if (ec != std::errc()) {
    return badQuantity(text, "not a number");
  }
  long double value = std::ldexp(mantissa, exp2);
  long double ten = 1;  // 10^|exp10| by multiplication: exact up to 10^27
  for (int i = 0; i < std::abs(exp10); ++i) ten *= 10;
  value = exp10 >= 0 ? value * ten : value / ten;
  if (negative) value = -value;
  const long double rounded = std::ceil(value - 1e-9L);  // absorb float noise such as 0.1*3
  // Compared with +-2^63, which every floating-point format holds exactly, so the check is
  // right even where long double is only a double (there INT64_MAX would round up to 2^63).
  constexpr long double kTwo63 = 9223372036854775808.0L;
  if (!std::isfinite(rounded) || rounded >= kTwo63 || rounded < -kTwo63)
    return badQuantity(text, "too large");
  return static_cast<int64_t>(rounded);
}

}  // namespace

Result<int64_t> parseQuantityMilli(std::string_view text) { return parseScaled(text, 3); }
Result<int64_t> parseQuantityValue(std::string_view text) { return parseScaled(text, 0); }

}  // namespace troupe
