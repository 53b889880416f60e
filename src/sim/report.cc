#include "troupe/sim/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "troupe/model/node.h"
#include "troupe/sim/report_text.h"
#include "troupe/sim/summary.h"

namespace troupe::sim {
namespace {

std::string withCommas(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

struct Topology {
  int placed = 0;
  int best = 0;
  double share() const { return placed == 0 ? 0.0 : 100.0 * best / placed; }
};

Topology topologyOf(const PolicyRuns& p) {
  Topology t;
  for (const RunResult& r : p.runs) {
    t.placed += r.multi_gpu_placed;
    t.best += r.multi_gpu_best;
  }
  return t;
}

double meanSeconds(const PolicyRuns& p) {
  double s = 0;
  for (const RunResult& r : p.runs) s += r.seconds;
  return p.runs.empty() ? 0 : s / static_cast<double>(p.runs.size());
}

int maxPercent(const Report& report) {
  int top = 0;
  for (const PolicyRuns& p : report.policies) {
    for (const RunResult& r : p.runs) {
      if (r.curve.empty() || r.capacity_gpus == 0) continue;
      top = std::max(top, static_cast<int>(std::floor(static_cast<double>(r.curve.back().arrived_milli) /
                                                      static_cast<double>(r.capacity_gpus) / 10)));
    }
  }
  return top;
}

// Mean allocation curve over seeds, per whole arrived percent.
std::map<int, Spread> meanCurve(const PolicyRuns& p, int max_percent) {
  std::map<int, std::vector<double>> at;
  for (const RunResult& r : p.runs) {
    for (auto [x, y] : allocationCurve(r, max_percent)) at[x].push_back(y);
  }
  std::map<int, Spread> out;
  for (auto& [x, ys] : at) out[x] = spreadOf(ys);
  return out;
}

std::string seedRange(const Report& r) {
  if (r.seeds == 1) return "seed " + std::to_string(r.first_seed);
  return std::to_string(r.seeds) + " seeds (" + std::to_string(r.first_seed) + ".." +
         std::to_string(r.first_seed + r.seeds - 1) + ")";
}

}  // namespace

std::vector<double> unallocatedAt(const PolicyRuns& runs, int percent) {
  std::vector<double> out;
  for (const RunResult& r : runs.runs) {
    if (std::optional<double> a = allocationAt(r, percent)) out.push_back(100.0 - *a);
  }
  return out;
}

std::vector<double> floorPercent(const Report& report) {
  for (const PolicyRuns& p : report.policies) {
    std::vector<double> out;
    for (const RunResult& r : p.runs) {
      if (r.floor_idle_milli && r.capacity_gpus > 0) {
        out.push_back(100.0 * static_cast<double>(*r.floor_idle_milli) /
                      static_cast<double>(r.capacity_gpus * model::kMilliPerGpu));
      }
    }
    if (!out.empty()) return out;
  }
  return {};
}

std::string renderTable(const Report& report) {
  int64_t gpus = 0;
  for (const PolicyRuns& p : report.policies) {
    if (!p.runs.empty()) gpus = p.runs.front().capacity_gpus;
  }
  std::string out = "Unallocated GPUs, % of " + withCommas(gpus) +
                    ", when the arrived requests reach a share of capacity\n";
  out += "(mean ± sd over " + seedRange(report) + "; lower is better)\n\n";
  std::string header = pad("policy", 16);
  for (int x : report.points) header += pad("@" + std::to_string(x) + "%", 16, true);
  header += pad("best GPU set", 16, true) + pad("s/run", 8, true);
  out += header + "\n" + std::string(header.size(), '-') + "\n";
  for (const PolicyRuns& p : report.policies) {
    std::string row = pad(p.policy, 16);
    for (int x : report.points) {
      std::vector<double> v = unallocatedAt(p, x);
      if (v.empty()) {
        row += pad("n/a", 16, true);
        continue;
      }
      Spread s = spreadOf(v);
      row += pad(fixed(s.mean, 2) + (s.n > 1 ? " ± " + fixed(s.sd, 2) : std::string()), 17, true);
    }
    Topology t = topologyOf(p);
    row += pad(t.placed == 0 ? "n/a" : fixed(t.share(), 1) + "%", 16, true);
    row += pad(fixed(meanSeconds(p), 2), 8, true);
    out += row + "\n";
  }
  if (std::vector<double> f = floorPercent(report); !f.empty()) {
    const Spread s = spreadOf(f);
    out += "\nfloor @100%: " + fixed(s.mean, 2) + (s.n > 1 ? " ± " + fixed(s.sd, 2) : std::string()) +
           " - the same requests packed with hindsight into the cluster's GPUs (CPU, nodes and\n"
           "models left out): what the request sizes alone leave idle. Above it is what placement\n"
           "can still win (docs/placement-quality.md).\n";
  }
  out += "\nbest GPU set: multi-GPU pods placed on a GPU set as well connected as any on their node.\n";
  out += "n/a at a point: the workload never reached it (raise the tuning or check the trace).\n";
  return out;
}

namespace {

// The runs' advisor outcomes, in seed order (runs without one are left out).
std::vector<const DefragOutcome*> defragOf(const PolicyRuns& p) {
  std::vector<const DefragOutcome*> out;
  for (const RunResult& run : p.runs) {
    if (run.defrag) out.push_back(&*run.defrag);
  }
  return out;
}

template <typename Field>
Spread defragSpread(const std::vector<const DefragOutcome*>& outcomes, Field field) {
  std::vector<double> v;
  for (const DefragOutcome* d : outcomes) v.push_back(field(*d));
  return spreadOf(v);
}

std::string meanSd(const Spread& s, int digits) {
  return fixed(s.mean, digits) + (s.n > 1 ? " ± " + fixed(s.sd, digits) : std::string());
}

}  // namespace

namespace {

std::vector<double> failedOfClass(const PolicyRuns& runs, size_t cls) {
  std::vector<double> out;
  for (const RunResult& r : runs.runs) out.push_back(r.by_size[cls].failed);
  return out;
}

double placedShareOfClass(const PolicyRuns& runs, size_t cls) {
  int64_t asked = 0, placed = 0;
  for (const RunResult& r : runs.runs) {
    asked += r.by_size[cls].milli;
    placed += r.by_size[cls].placed_milli;
  }
  return asked > 0 ? 100.0 * static_cast<double>(placed) / static_cast<double>(asked) : 0.0;
}

}  // namespace

std::string renderSizeTable(const Report& report) {
  const PolicyRuns* first = nullptr;
  for (const PolicyRuns& p : report.policies) {
    if (!p.runs.empty()) first = &p;
  }
  if (first == nullptr) return "";
  std::string out = "Failed requests by size, of the pods that arrived up to 100% of capacity\n";
  out += "(mean ± sd over " + seedRange(report) + "; in brackets the GPU-weighted % placed)\n\n";
  std::string header = pad("policy", 16);
  for (size_t c = 0; c < kSizeClasses; ++c) {
    header += pad(std::string(sizeClassName(c)) + (c == 0   ? " only"
                                                   : c == 1 ? " of a GPU"
                                                            : " GPU"),
                  22, true);
  }
  out += header + "\n" + std::string(header.size(), '-') + "\n";
  std::string pods = pad("pods (mean)", 16);
  for (size_t c = 0; c < kSizeClasses; ++c) {
    double n = 0;
    for (const RunResult& r : first->runs) n += r.by_size[c].pods;
    pods += pad(fixed(n / static_cast<double>(first->runs.size()), 1), 22, true);
  }
  out += pods + "\n";
  for (const PolicyRuns& p : report.policies) {
    if (p.runs.empty()) continue;
    std::string row = pad(p.policy, 16);
    for (size_t c = 0; c < kSizeClasses; ++c) {
      std::string cell = meanSd(spreadOf(failedOfClass(p, c)), 1);
      if (c > 0) cell += " (" + fixed(placedShareOfClass(p, c), 1) + ")";
      row += pad(cell, 23, true);
    }
    out += row + "\n";
  }
  return out;
}

std::string renderDefragTable(const Report& report) {
  std::vector<int> ks;
  for (const PolicyRuns& p : report.policies) {
    for (const DefragOutcome* d : defragOf(p)) ks = d->k;
  }
  if (ks.empty()) return "";
  std::string out = "Defragmentation at 100% arrived: fragmented GPUs (free GPUs the trace's typical pods\n";
  out += "cannot use, FGD's measure) before and after up to K greedy pod moves\n";
  out += "(mean ± sd over " + seedRange(report) + "; lower is better; moves never change the free GPUs)\n\n";
  std::string header = pad("policy", 16) + pad("free GPUs", 16, true) + pad("fragmented", 16, true);
  for (int k : ks) header += pad("K=" + std::to_string(k), 16, true);
  header += pad("moves", 8, true) + pad("s/run", 8, true);
  out += header + "\n" + std::string(header.size(), '-') + "\n";
  for (const PolicyRuns& p : report.policies) {
    const std::vector<const DefragOutcome*> d = defragOf(p);
    if (d.empty()) continue;
    std::string row = pad(p.policy, 16);
    row += pad(meanSd(defragSpread(d, [](const DefragOutcome& o) { return o.free_gpus; }), 1), 17, true);
    row +=
        pad(meanSd(defragSpread(d, [](const DefragOutcome& o) { return o.fragmented_before; }), 1), 17, true);
    for (size_t i = 0; i < ks.size(); ++i) {
      row += pad(meanSd(defragSpread(d, [i](const DefragOutcome& o) { return o.fragmented_after[i]; }), 1),
                 17, true);
    }
    row += pad(
        fixed(
            defragSpread(d, [](const DefragOutcome& o) { return static_cast<double>(o.moves.back()); }).mean,
            1),
        8, true);
    row += pad(fixed(defragSpread(d, [](const DefragOutcome& o) { return o.seconds; }).mean, 2), 8, true);
    out += row + "\n";
  }
  out += "\nmoves: mean moves made at the largest K (fewer when no move lowers fragmentation).\n";
  return out;
}

std::string renderJson(const Report& report) {
  std::string out =
      "{\n  \"nodes\": " + jsonString(report.nodes_file) + ",\n  \"pods\": " + jsonString(report.pods_file) +
      ",\n  \"first_seed\": " + std::to_string(report.first_seed) +
      ",\n  \"seeds\": " + std::to_string(report.seeds) + ",\n  \"seconds\": " + fixed(report.seconds, 3);
  if (std::vector<double> f = floorPercent(report); !f.empty()) {
    const Spread s = spreadOf(f);
    out += ",\n  \"floor_percent_100\": {\"mean\": " + fixed(s.mean, 4) + ", \"sd\": " + fixed(s.sd, 4) +
           ", \"per_seed\": [";
    for (size_t k = 0; k < f.size(); ++k) out += (k ? ", " : "") + fixed(f[k], 4);
    out += "]}";
  } else {
    out += ",\n  \"floor_percent_100\": null";
  }
  out += ",\n  \"policies\": [";
  for (size_t i = 0; i < report.policies.size(); ++i) {
    const PolicyRuns& p = report.policies[i];
    out += i ? ",\n" : "\n";
    out += "    {\"policy\": " + jsonString(p.policy) + ", \"unallocated_percent\": {";
    for (size_t j = 0; j < report.points.size(); ++j) {
      const int x = report.points[j];
      std::vector<double> v = unallocatedAt(p, x);
      Spread s = spreadOf(v);
      out += (j ? ", " : "") + std::string("\"") + std::to_string(x) + "\": ";
      if (v.empty()) {
        out += "null";
        continue;
      }
      out += "{\"mean\": " + fixed(s.mean, 4) + ", \"sd\": " + fixed(s.sd, 4) +
             ", \"min\": " + fixed(s.min, 4) + ", \"max\": " + fixed(s.max, 4) + ", \"per_seed\": [";
      for (size_t k = 0; k < v.size(); ++k) out += (k ? ", " : "") + fixed(v[k], 4);
      out += "]}";
    }
    Topology t = topologyOf(p);
    out += "}, \"multi_gpu_placed\": " + std::to_string(t.placed) +
           ", \"multi_gpu_best_set\": " + std::to_string(t.best) +
           ", \"best_set_percent\": " + (t.placed ? fixed(t.share(), 2) : "null") +
           ", \"seconds_per_run\": " + fixed(meanSeconds(p), 3);
    out += ", \"by_size_100\": {";
    for (size_t c = 0; c < kSizeClasses; ++c) {
      const Spread f = spreadOf(failedOfClass(p, c));
      int pods_total = 0;
      for (const RunResult& r : p.runs) pods_total += r.by_size[c].pods;
      out +=
          (c ? ", " : "") + jsonString(std::string(sizeClassName(c))) + ": {\"pods\": " +
          fixed(p.runs.empty() ? 0.0 : static_cast<double>(pods_total) / static_cast<double>(p.runs.size()),
                2) +
          ", \"failed\": {\"mean\": " + fixed(f.mean, 3) + ", \"sd\": " + fixed(f.sd, 3) +
          "}, \"gpu_placed_percent\": " + fixed(placedShareOfClass(p, c), 3) + "}";
    }
    out += "}";
    if (const std::vector<const DefragOutcome*> d = defragOf(p); !d.empty()) {
      auto spreadJson = [](const Spread& sp) {
        return "{\"mean\": " + fixed(sp.mean, 3) + ", \"sd\": " + fixed(sp.sd, 3) + "}";
      };
      out += ", \"defrag\": {\"free_gpus\": " +
             spreadJson(defragSpread(d, [](const DefragOutcome& o) { return o.free_gpus; })) +
             ", \"fragmented_gpus_before\": " +
             spreadJson(defragSpread(d, [](const DefragOutcome& o) { return o.fragmented_before; })) +
             ", \"after\": [";
      for (size_t b = 0; b < d.front()->k.size(); ++b) {
        out += (b ? ", " : "") + std::string("{\"k\": ") + std::to_string(d.front()->k[b]) +
               ", \"fragmented_gpus\": " +
               spreadJson(defragSpread(d, [b](const DefragOutcome& o) { return o.fragmented_after[b]; })) +
               ", \"moves\": " +
               spreadJson(
                   defragSpread(d, [b](const DefragOutcome& o) { return static_cast<double>(o.moves[b]); })) +
               "}";
      }
      out += "], \"seconds_per_run\": " +
             fixed(defragSpread(d, [](const DefragOutcome& o) { return o.seconds; }).mean, 3) + "}";
    }
    out += "}";
  }
  out += "\n  ]\n}\n";
  return out;
}

std::string renderCurvesCsv(const Report& report) {
  std::string out = "policy,arrived_percent,allocation_mean,allocation_sd,seeds\n";
  const int top = maxPercent(report);
  for (const PolicyRuns& p : report.policies) {
    for (const auto& [x, s] : meanCurve(p, top)) {
      out += std::string(p.policy) + "," + std::to_string(x) + "," + fixed(s.mean, 4) + "," + fixed(s.sd, 4) +
             "," + std::to_string(s.n) + "\n";
    }
  }
  return out;
}

std::string renderRunsCsv(const Report& report) {
  std::string out = "policy,seed";
  for (int x : report.points) out += ",unallocated_at_" + std::to_string(x);
  out += ",multi_gpu_placed,multi_gpu_best,pods,placed,seconds";
  for (size_t c = 0; c < kSizeClasses; ++c) out += ",failed_" + std::string(sizeClassName(c));
  out += "\n";
  for (const PolicyRuns& p : report.policies) {
    for (const RunResult& r : p.runs) {
      out += std::string(p.policy) + "," + std::to_string(r.seed);
      for (int x : report.points) {
        std::optional<double> a = allocationAt(r, x);
        out += "," + (a ? fixed(100.0 - *a, 4) : std::string());
      }
      out += "," + std::to_string(r.multi_gpu_placed) + "," + std::to_string(r.multi_gpu_best) + "," +
             std::to_string(r.pods) + "," + std::to_string(r.placed) + "," + fixed(r.seconds, 3);
      for (const SizeTally& t : r.by_size) out += "," + std::to_string(t.failed);
      out += "\n";
    }
  }
  return out;
}

std::string renderSvg(const Report& report) {
  // Two panels: the whole run, and the end of it where policies differ.
  const int top = std::max(10, maxPercent(report));
  struct Panel {
    double x0, x1, y0, y1;
    double left, width;
    const char* title;
  };
  const double plot_top = 50, plot_h = 320;
  const Panel panels[] = {{0, static_cast<double>(top), 0, 100, 70, 360, "whole run"},
                          {80, static_cast<double>(top), 80, 100, 520, 360, "from 80% arrived (zoom)"}};
  const char* colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1200\" height=\"440\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"450\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">GPU allocation against arrived "
      "workload (" +
      xmlEscape(seedRange(report)) + ", mean)</text>\n";
  std::vector<std::map<int, Spread>> curves;
  for (const PolicyRuns& p : report.policies) curves.push_back(meanCurve(p, top));
  for (const Panel& pn : panels) {
    auto sx = [&](double x) { return pn.left + (x - pn.x0) / (pn.x1 - pn.x0) * pn.width; };
    auto sy = [&](double y) { return plot_top + plot_h - (y - pn.y0) / (pn.y1 - pn.y0) * plot_h; };
    svg += "<text x=\"" + fixed(pn.left + pn.width / 2, 0) + "\" y=\"44\" text-anchor=\"middle\">" +
           pn.title + "</text>\n";
    svg += "<rect x=\"" + fixed(pn.left, 1) + "\" y=\"" + fixed(plot_top, 1) + "\" width=\"" +
           fixed(pn.width, 1) + "\" height=\"" + fixed(plot_h, 1) + "\" fill=\"none\" stroke=\"#333\"/>\n";
    const double xstep = (pn.x1 - pn.x0) > 60 ? 20 : 10, ystep = (pn.y1 - pn.y0) > 40 ? 20 : 5;
    for (double x = pn.x0; x <= pn.x1 + 1e-9; x += xstep) {
      svg += "<line x1=\"" + fixed(sx(x), 1) + "\" y1=\"" + fixed(plot_top, 1) + "\" x2=\"" +
             fixed(sx(x), 1) + "\" y2=\"" + fixed(plot_top + plot_h, 1) + "\" stroke=\"#eee\"/>\n";
      svg += "<text x=\"" + fixed(sx(x), 1) + "\" y=\"" + fixed(plot_top + plot_h + 16, 1) +
             "\" text-anchor=\"middle\">" + fixed(x, 0) + "</text>\n";
    }
    for (double y = pn.y0; y <= pn.y1 + 1e-9; y += ystep) {
      svg += "<line x1=\"" + fixed(pn.left, 1) + "\" y1=\"" + fixed(sy(y), 1) + "\" x2=\"" +
             fixed(pn.left + pn.width, 1) + "\" y2=\"" + fixed(sy(y), 1) + "\" stroke=\"#eee\"/>\n";
      svg += "<text x=\"" + fixed(pn.left - 6, 1) + "\" y=\"" + fixed(sy(y) + 4, 1) +
             "\" text-anchor=\"end\">" + fixed(y, 0) + "</text>\n";
    }
    svg += "<text x=\"" + fixed(pn.left + pn.width / 2, 0) + "\" y=\"" + fixed(plot_top + plot_h + 34, 0) +
           "\" text-anchor=\"middle\">arrived workload, % of GPU capacity</text>\n";
    svg += "<text transform=\"translate(" + fixed(pn.left - 42, 0) + "," + fixed(plot_top + plot_h / 2, 0) +
           ") rotate(-90)\" text-anchor=\"middle\">GPUs allocated, %</text>\n";
    for (size_t i = 0; i < curves.size(); ++i) {
      std::string points;
      for (const auto& [x, s] : curves[i]) {
        if (x < pn.x0 || x > pn.x1 || s.mean < pn.y0) continue;
        points += fixed(sx(x), 1) + "," + fixed(sy(std::min(s.mean, pn.y1)), 1) + " ";
      }
      svg += "<polyline fill=\"none\" stroke-width=\"1.8\" stroke=\"" + std::string(colors[i % 10]) +
             "\" points=\"" + points + "\"/>\n";
    }
  }
  // Legend, with each policy's unallocated % at the first reported point.
  double ly = 60;
  for (size_t i = 0; i < report.policies.size(); ++i) {
    const PolicyRuns& p = report.policies[i];
    std::string label = p.policy;
    if (!report.points.empty()) {
      std::vector<double> v = unallocatedAt(p, report.points.front());
      if (!v.empty())
        label += " (" + fixed(spreadOf(v).mean, 2) + "% unallocated @" +
                 std::to_string(report.points.front()) + "%)";
    }
    svg += "<line x1=\"900\" y1=\"" + fixed(ly, 0) + "\" x2=\"925\" y2=\"" + fixed(ly, 0) +
           "\" stroke-width=\"3\" stroke=\"" + std::string(colors[i % 10]) + "\"/>\n<text x=\"930\" y=\"" +
           fixed(ly + 4, 0) + "\" font-size=\"10\">" + xmlEscape(label) + "</text>\n";
    ly += 18;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace troupe::sim
