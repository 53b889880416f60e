#include "troupe/sim/summary.h"

#include <algorithm>
#include <cmath>

namespace troupe::sim {
namespace {

// Python's round(x) and round(x, 2): to nearest, ties to even (the default FP rounding mode).
double roundEven(double x) { return std::nearbyint(x); }

}  // namespace

std::optional<double> allocationAt(const RunResult& run, int percent) {
  const double gpus = static_cast<double>(run.capacity_gpus);
  double sum = 0;
  int n = 0;
  for (const CurvePoint& p : run.curve) {
    if (roundEven(static_cast<double>(p.arrived_milli) / gpus / 10) != percent) continue;
    sum += roundEven(static_cast<double>(p.used_milli) / gpus / 10 * 100) / 100;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

Spread spreadOf(const std::vector<double>& values) {
  Spread s;
  s.n = static_cast<int>(values.size());
  if (values.empty()) return s;
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  for (double v : values) s.mean += v;
  s.mean /= s.n;
  if (s.n > 1) {
    double var = 0;
    for (double v : values) var += (v - s.mean) * (v - s.mean);
    s.sd = std::sqrt(var / (s.n - 1));
  }
  return s;
}

std::vector<std::pair<int, double>> allocationCurve(const RunResult& run, int max_percent) {
  // One pass: bucket every pod by its rounded arrived percent.
  std::vector<double> sum(static_cast<size_t>(max_percent + 1), 0);
  std::vector<int> count(static_cast<size_t>(max_percent + 1), 0);
  const double gpus = static_cast<double>(run.capacity_gpus);
  for (const CurvePoint& p : run.curve) {
    const double x = roundEven(static_cast<double>(p.arrived_milli) / gpus / 10);
    if (x < 0 || x > max_percent) continue;
    sum[static_cast<size_t>(x)] += roundEven(static_cast<double>(p.used_milli) / gpus / 10 * 100) / 100;
    ++count[static_cast<size_t>(x)];
  }
  std::vector<std::pair<int, double>> out;
  for (int x = 0; x <= max_percent; ++x) {
    if (count[static_cast<size_t>(x)] > 0)
      out.emplace_back(x, sum[static_cast<size_t>(x)] / count[static_cast<size_t>(x)]);
  }
  return out;
}

}  // namespace troupe::sim
