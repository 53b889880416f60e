#include "troupe/sim/go_random.h"

#include <stdexcept>

namespace troupe::sim {
namespace {

constexpr int32_t kInt32Max = 2147483647;
constexpr uint64_t kMask63 = (uint64_t{1} << 63) - 1;

int32_t seedrand(int32_t x) {
  constexpr int32_t a = 48271, q = 44488, r = 3399;
  const int32_t hi = x / q, lo = x % q;
  x = a * lo - r * hi;
  if (x < 0) x += kInt32Max;
  return x;
}

// Polynomials over Z/2^64 modulo P(x) = x^607 - x^334 - 1, the characteristic polynomial of
// y[k] = y[k-607] + y[k-273] (the source's recurrence seen as a sequence).
using Poly = std::vector<uint64_t>;  // 607 coefficients

Poly mulMod(const Poly& a, const Poly& b) {
  const int n = GoRandom::kLength;
  std::vector<uint64_t> prod(static_cast<size_t>(2 * n - 1), 0);
  for (int i = 0; i < n; ++i) {
    if (a[static_cast<size_t>(i)] == 0) continue;
    for (int j = 0; j < n; ++j)
      prod[static_cast<size_t>(i + j)] += a[static_cast<size_t>(i)] * b[static_cast<size_t>(j)];
  }
  // x^607 = x^334 + 1: fold the high terms down, highest first.
  for (int d = 2 * n - 2; d >= n; --d) {
    const uint64_t c = prod[static_cast<size_t>(d)];
    if (c == 0) continue;
    prod[static_cast<size_t>(d)] = 0;
    prod[static_cast<size_t>(d - n + 334)] += c;
    prod[static_cast<size_t>(d - n)] += c;
  }
  prod.resize(static_cast<size_t>(n));
  return prod;
}

Poly timesX(const Poly& a) {
  const int n = GoRandom::kLength;
  Poly out(static_cast<size_t>(n), 0);
  const uint64_t top = a[static_cast<size_t>(n - 1)];
  for (int i = n - 1; i > 0; --i) out[static_cast<size_t>(i)] = a[static_cast<size_t>(i - 1)];
  out[0] = top;
  out[334] += top;
  return out;
}

// gen_cooked.go: srand(1), then 7.8e12 calls of the raw (64-bit) generator; the table is the
// final register.
std::array<int64_t, GoRandom::kLength> deriveCooked() {
  const int n = GoRandom::kLength;
  std::array<uint64_t, GoRandom::kLength> init{};
  int32_t x = 1;
  for (int i = -20; i < n; ++i) {
    x = seedrand(x);
    if (i >= 0) {
      uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(x)) << 20;
      x = seedrand(x);
      u ^= static_cast<uint64_t>(static_cast<int64_t>(x)) << 10;
      x = seedrand(x);
      u ^= static_cast<uint64_t>(static_cast<int64_t>(x));
      init[static_cast<size_t>(i)] = u;
    }
  }
  // Step k (from 1) writes position feed_k = (333 - (k-1)) mod 607. The value at position p
  // before any step plays y[j] for the j <= 0 with feed_j = p; then y[k] = y[k-607] + y[k-273].
  // With z[i] = y[i - 606], z[0..606] are the initial values and z[m] = sum a_i z[i] where
  // x^m mod P = sum a_i x^i.
  auto feedOf = [&](int64_t k) {
    int64_t p = (333 - (k - 1)) % n;
    return static_cast<int>(p < 0 ? p + n : p);
  };
  std::array<uint64_t, GoRandom::kLength> z0{};
  for (int64_t j = -(n - 1); j <= 0; ++j)
    z0[static_cast<size_t>(j + n - 1)] = init[static_cast<size_t>(feedOf(j))];
  const int64_t steps = 7800000000000;
  // x^(steps - 606 + 606) = x^steps gives z[steps] = y[steps - 606]; walk on with timesX.
  Poly result(static_cast<size_t>(n), 0), base(static_cast<size_t>(n), 0);
  result[0] = 1;
  base[1] = 1;
  for (int64_t e = steps; e > 0; e >>= 1) {
    if (e & 1) result = mulMod(result, base);
    if (e > 1) base = mulMod(base, base);
  }
  std::array<int64_t, GoRandom::kLength> cooked{};
  for (int64_t y = steps - (n - 1); y <= steps; ++y) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v += result[static_cast<size_t>(i)] * z0[static_cast<size_t>(i)];
    cooked[static_cast<size_t>(feedOf(y))] = static_cast<int64_t>(v);
    result = timesX(result);
  }
  return cooked;
}

}  // namespace

const std::array<int64_t, GoRandom::kLength>& GoRandom::cookedTable() {
  static const std::array<int64_t, kLength> table = deriveCooked();
  return table;
}

GoRandom::GoRandom(int64_t seed) {
  const auto& cooked = cookedTable();
  seed %= kInt32Max;
  if (seed < 0) seed += kInt32Max;
  if (seed == 0) seed = 89482311;
  int32_t x = static_cast<int32_t>(seed);
  for (int i = -20; i < kLength; ++i) {
    x = seedrand(x);
    if (i >= 0) {
      uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(x)) << 40;
      x = seedrand(x);
      u ^= static_cast<uint64_t>(static_cast<int64_t>(x)) << 20;
      x = seedrand(x);
      u ^= static_cast<uint64_t>(static_cast<int64_t>(x));
      u ^= static_cast<uint64_t>(cooked[static_cast<size_t>(i)]);
      vec_[static_cast<size_t>(i)] = static_cast<int64_t>(u);
    }
  }
}

int64_t GoRandom::int63() {
  if (--tap_ < 0) tap_ += kLength;
  if (--feed_ < 0) feed_ += kLength;
  const uint64_t v = static_cast<uint64_t>(vec_[static_cast<size_t>(feed_)]) +
                     static_cast<uint64_t>(vec_[static_cast<size_t>(tap_)]);
  vec_[static_cast<size_t>(feed_)] = static_cast<int64_t>(v);
  return static_cast<int64_t>(v & kMask63);
}

int64_t GoRandom::int63n(int64_t n) {
  if (n <= 0) throw std::invalid_argument("int63n: n must be > 0");
  if ((n & (n - 1)) == 0) return int63() & (n - 1);
  const int64_t max = static_cast<int64_t>(kMask63 - (uint64_t{1} << 63) % static_cast<uint64_t>(n));
  int64_t v = int63();
  while (v > max) v = int63();
  return v % n;
}

int32_t GoRandom::int31n(int32_t n) {
  if (n <= 0) throw std::invalid_argument("int31n: n must be > 0");
  if ((n & (n - 1)) == 0) return int31() & (n - 1);
  const int32_t max = static_cast<int32_t>(kInt32Max - (uint32_t{1} << 31) % static_cast<uint32_t>(n));
  int32_t v = int31();
  while (v > max) v = int31();
  return v % n;
}

int GoRandom::intn(int n) { return static_cast<int>(int31n(static_cast<int32_t>(n))); }

int32_t GoRandom::boundedForShuffle(int32_t n) {
  uint32_t v = uint32();
  uint64_t prod = static_cast<uint64_t>(v) * static_cast<uint64_t>(n);
  uint32_t low = static_cast<uint32_t>(prod);
  if (low < static_cast<uint32_t>(n)) {
    const uint32_t thresh = static_cast<uint32_t>(-n) % static_cast<uint32_t>(n);
    while (low < thresh) {
      v = uint32();
      prod = static_cast<uint64_t>(v) * static_cast<uint64_t>(n);
      low = static_cast<uint32_t>(prod);
    }
  }
  return static_cast<int32_t>(prod >> 32);
}

std::vector<int> GoRandom::perm(int n) {
  std::vector<int> m(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int j = intn(i + 1);
    m[static_cast<size_t>(i)] = m[static_cast<size_t>(j)];
    m[static_cast<size_t>(j)] = i;
  }
  return m;
}

}  // namespace troupe::sim
