#include "troupe/sim/tenant_report.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "troupe/sim/report_text.h"
#include "troupe/sim/summary.h"

namespace troupe::sim {
namespace {

// Mean over the seeds' runs of one number.
double mean(const std::vector<TenantRun>& runs, const std::function<double(const TenantRun&)>& f) {
  std::vector<double> v;
  for (const TenantRun& r : runs) v.push_back(f(r));
  return spreadOf(v).mean;
}

std::string meanSd(const std::vector<TenantRun>& runs, const std::function<double(const TenantRun&)>& f,
                   double scale, int digits) {
  std::vector<double> v;
  for (const TenantRun& r : runs) v.push_back(f(r) * scale);
  const Spread s = spreadOf(v);
  return fixed(s.mean, digits) + (s.n > 1 ? " ± " + fixed(s.sd, digits) : std::string());
}

std::string seedText(const TenantReport& r) {
  const size_t n = r.fifo.size();
  if (n <= 1) return "seed " + std::to_string(r.first_seed);
  return std::to_string(n) + " seeds (" + std::to_string(r.first_seed) + ".." +
         std::to_string(r.first_seed + static_cast<int64_t>(n) - 1) + ")";
}

struct Side {
  const char* name;
  const std::vector<TenantRun>* runs;
};

std::vector<Side> sides(const TenantReport& r) { return {{"fifo", &r.fifo}, {"fair-share", &r.fair}}; }

size_t tenantCount(const TenantReport& r) { return r.fifo.empty() ? 0 : r.fifo.front().tenants.size(); }

std::string tenantLabel(const TenantSpec& t) {
  std::string s = t.name + " (w " + fixed(t.weight, t.weight == static_cast<int64_t>(t.weight) ? 0 : 2);
  if (t.guaranteed_gpus > 0) s += ", g " + std::to_string(t.guaranteed_gpus);
  return s + ")";
}

}  // namespace

std::string renderTenantTable(const TenantReport& r) {
  if (r.fifo.empty() || r.fair.empty()) return "no runs\n";
  std::string out = "Tenants on " + std::to_string(r.fifo.front().capacity_gpus) + " GPUs, load " +
                    fixed(r.load, r.load == static_cast<int64_t>(r.load) ? 0 : 2) +
                    (r.tune > 0 ? ", tuned to " + fixed(r.tune, 2) + "x capacity" : std::string()) +
                    ", policy " + r.policy + ", " + seedText(r) + " (mean ± sd over seeds)\n\n";
  std::string header = pad("", 34) + pad("fifo", 18, true) + pad("fair-share", 18, true);
  out += header + "\n" + std::string(header.size(), '-') + "\n";
  auto row = [&](const std::string& label, const std::function<double(const TenantRun&)>& f, double scale,
                 int digits) {
    out += pad(label, 34) + pad(meanSd(r.fifo, f, scale, digits), 19, true) +
           pad(meanSd(r.fair, f, scale, digits), 19, true) + "\n";
  };
  row(
      "GPU utilisation, busy time (%)", [](const TenantRun& x) { return x.utilisation; }, 100, 1);
  row(
      "GPU utilisation, contended (%)", [](const TenantRun& x) { return x.contended_utilisation; }, 100, 1);
  row(
      "contended time (s)", [](const TenantRun& x) { return x.contended_seconds; }, 1, 0);
  row(
      "busy time (s)", [](const TenantRun& x) { return x.busy_seconds; }, 1, 0);
  row(
      "Jain's index of share/fair share", [](const TenantRun& x) { return x.jain; }, 1, 3);
  row(
      "pods waiting at the end",
      [](const TenantRun& x) {
        double n = 0;
        for (const TenantOutcome& t : x.tenants) n += t.waiting_at_end;
        return n;
      },
      1, 0);
  row(
      "8-GPU pods' wait p50 (s)", [](const TenantRun& x) { return x.whole_node_waits.p50; }, 1, 0);
  row(
      "8-GPU pods' wait p95 (s)", [](const TenantRun& x) { return x.whole_node_waits.p95; }, 1, 0);
  row(
      "8-GPU pods waiting at the end", [](const TenantRun& x) { return x.whole_node_waiting_at_end; }, 1, 0);
  out += "\nPer tenant: share of allocated GPUs while contended against its fair share, and waits (s)\n\n";
  header = pad("ordering", 12) + pad("tenant", 16) + pad("pods", 7, true) + pad("share %", 9, true) +
           pad("fair %", 9, true) + pad("share/fair", 12, true) + pad("wait mean", 11, true) +
           pad("p50", 9, true) + pad("p95", 9, true) + pad("p99", 9, true);
  out += header + "\n" + std::string(header.size(), '-') + "\n";
  for (const Side& side : sides(r)) {
    for (size_t t = 0; t < tenantCount(r); ++t) {
      const std::vector<TenantRun>& runs = *side.runs;
      auto of = [t](const std::function<double(const TenantOutcome&)>& f) {
        return [t, f](const TenantRun& x) { return f(x.tenants[t]); };
      };
      const double share = mean(runs, of([](const TenantOutcome& o) { return o.share; }));
      const double fair = mean(runs, of([](const TenantOutcome& o) { return o.fair_share; }));
      out += pad(side.name, 12) + pad(tenantLabel(runs.front().tenants[t].spec), 16) +
             pad(fixed(mean(runs, of([](const TenantOutcome& o) { return o.pods; })), 0), 7, true) +
             pad(fixed(share * 100, 1), 9, true) + pad(fixed(fair * 100, 1), 9, true) +
             pad(fair > 0 ? fixed(share / fair, 2) : "n/a", 12, true) +
             pad(fixed(mean(runs, of([](const TenantOutcome& o) { return o.waits.mean; })), 1), 11, true) +
             pad(fixed(mean(runs, of([](const TenantOutcome& o) { return o.waits.p50; })), 0), 9, true) +
             pad(fixed(mean(runs, of([](const TenantOutcome& o) { return o.waits.p95; })), 0), 9, true) +
             pad(fixed(mean(runs, of([](const TenantOutcome& o) { return o.waits.p99; })), 0), 9, true) +
             "\n";
    }
  }
  out +=
      "\ncontended: a GPU pod is waiting. busy: from the first arrival to the last start. Fair share:\n"
      "the core's weighted fair share of the demand (what tenants hold and wait for), as a share of\n"
      "the whole. Jain's index: (sum x)^2 / (n sum x^2) over tenants, x = share / fair share.\n";
  if (r.fifo.front().never_fit > 0) {
    out += std::to_string(r.fifo.front().never_fit) +
           " pods fit no node of the empty cluster and never queue (left out of the numbers).\n";
  }
  return out;
}

std::string renderTenantJson(const TenantReport& r) {
  std::string out = "{\n  \"nodes\": " + jsonString(r.nodes_file) +
                    ",\n  \"pods\": " + jsonString(r.pods_file) + ",\n  \"policy\": " + jsonString(r.policy) +
                    ",\n  \"load\": " + fixed(r.load, 4) + ",\n  \"tune\": " + fixed(r.tune, 4) +
                    ",\n  \"first_seed\": " + std::to_string(r.first_seed) +
                    ",\n  \"seeds\": " + std::to_string(r.fifo.size()) +
                    ",\n  \"seconds\": " + fixed(r.seconds, 3) + ",\n  \"orderings\": [";
  bool first_side = true;
  for (const Side& side : sides(r)) {
    out += first_side ? "\n" : ",\n";
    first_side = false;
    out += "    {\"ordering\": " + jsonString(side.name) + ", \"runs\": [";
    for (size_t i = 0; i < side.runs->size(); ++i) {
      const TenantRun& x = (*side.runs)[i];
      out += (i ? ",\n" : "\n");
      out += "      {\"seed\": " + std::to_string(x.seed) +
             ", \"capacity_gpus\": " + std::to_string(x.capacity_gpus) +
             ", \"utilisation\": " + fixed(x.utilisation, 5) +
             ", \"contended_utilisation\": " + fixed(x.contended_utilisation, 5) +
             ", \"busy_seconds\": " + fixed(x.busy_seconds, 1) +
             ", \"contended_seconds\": " + fixed(x.contended_seconds, 1) + ", \"jain\": " + fixed(x.jain, 5) +
             ", \"never_fit\": " + std::to_string(x.never_fit) +
             ", \"whole_node_wait_seconds\": {\"n\": " + std::to_string(x.whole_node_waits.n) +
             ", \"mean\": " + fixed(x.whole_node_waits.mean, 2) +
             ", \"p50\": " + fixed(x.whole_node_waits.p50, 2) +
             ", \"p95\": " + fixed(x.whole_node_waits.p95, 2) +
             ", \"waiting_at_end\": " + std::to_string(x.whole_node_waiting_at_end) + "}, \"tenants\": [";
      for (size_t t = 0; t < x.tenants.size(); ++t) {
        const TenantOutcome& o = x.tenants[t];
        out += (t ? ", " : "") + std::string("{\"name\": ") + jsonString(o.spec.name) +
               ", \"weight\": " + fixed(o.spec.weight, 4) +
               ", \"guaranteed_gpus\": " + std::to_string(o.spec.guaranteed_gpus) +
               ", \"pods\": " + std::to_string(o.pods) + ", \"started\": " + std::to_string(o.started) +
               ", \"waiting_at_end\": " + std::to_string(o.waiting_at_end) +
               ", \"share\": " + fixed(o.share, 5) + ", \"fair_share\": " + fixed(o.fair_share, 5) +
               ", \"wait_seconds\": {\"mean\": " + fixed(o.waits.mean, 2) +
               ", \"p50\": " + fixed(o.waits.p50, 2) + ", \"p95\": " + fixed(o.waits.p95, 2) +
               ", \"p99\": " + fixed(o.waits.p99, 2) + "}}";
      }
      out += "]}";
    }
    out += "\n    ]}";
  }
  out += "\n  ]\n}\n";
  return out;
}

std::string renderTenantSharesCsv(const TenantReport& r) {
  std::string out = "ordering,seed,start_s,end_s,tenant,share,fair_share,allocated\n";
  for (const Side& side : sides(r)) {
    if (side.runs->empty()) continue;
    const TenantRun& x = side.runs->front();
    for (const ShareSample& s : x.samples) {
      for (size_t t = 0; t < x.tenants.size(); ++t) {
        out += std::string(side.name) + "," + std::to_string(x.seed) + "," + fixed(s.start, 2) + "," +
               fixed(s.end, 2) + "," + x.tenants[t].spec.name + "," + fixed(s.share[t], 5) + "," +
               fixed(s.fair[t], 5) + "," + fixed(s.allocated, 5) + "\n";
      }
    }
  }
  return out;
}

std::string renderTenantSvg(const TenantReport& r) {
  const char* colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  const double plot_top = 50, plot_h = 320, width = 440;
  std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1200\" height=\"440\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"540\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">Share of allocated GPUs over time "
      "(solid) against fair share (dashed), load " +
      fixed(r.load, 0) + ", seed " + std::to_string(r.first_seed) + "</text>\n";
  double left = 70;
  for (const Side& side : sides(r)) {
    if (side.runs->empty()) continue;
    const TenantRun& x = side.runs->front();
    const double t1 = std::max(1.0, x.samples.empty() ? 1.0 : x.samples.back().end);
    auto sx = [&](double t) { return left + t / t1 * width; };
    auto sy = [&](double y) { return plot_top + plot_h - y * plot_h; };
    svg += "<text x=\"" + fixed(left + width / 2, 0) + "\" y=\"44\" text-anchor=\"middle\">" + side.name +
           " (Jain " + fixed(x.jain, 3) + ")</text>\n";
    svg += "<rect x=\"" + fixed(left, 1) + "\" y=\"" + fixed(plot_top, 1) + "\" width=\"" + fixed(width, 1) +
           "\" height=\"" + fixed(plot_h, 1) + "\" fill=\"none\" stroke=\"#333\"/>\n";
    for (int i = 0; i <= 5; ++i) {
      const double y = i * 0.2, t = t1 * i / 5;
      svg += "<line x1=\"" + fixed(left, 1) + "\" y1=\"" + fixed(sy(y), 1) + "\" x2=\"" +
             fixed(left + width, 1) + "\" y2=\"" + fixed(sy(y), 1) + "\" stroke=\"#eee\"/>\n";
      svg += "<text x=\"" + fixed(left - 6, 1) + "\" y=\"" + fixed(sy(y) + 4, 1) + "\" text-anchor=\"end\">" +
             fixed(y * 100, 0) + "</text>\n";
      svg += "<text x=\"" + fixed(sx(t), 1) + "\" y=\"" + fixed(plot_top + plot_h + 16, 1) +
             "\" text-anchor=\"middle\">" + fixed(t, 0) + "</text>\n";
    }
    svg += "<text x=\"" + fixed(left + width / 2, 0) + "\" y=\"" + fixed(plot_top + plot_h + 34, 0) +
           "\" text-anchor=\"middle\">simulated time, s</text>\n";
    svg += "<text transform=\"translate(" + fixed(left - 42, 0) + "," + fixed(plot_top + plot_h / 2, 0) +
           ") rotate(-90)\" text-anchor=\"middle\">share of allocated GPUs, %</text>\n";
    // GPUs allocated as a share of capacity, in grey behind the tenants.
    std::string used;
    for (const ShareSample& s : x.samples)
      used += fixed(sx((s.start + s.end) / 2), 1) + "," + fixed(sy(s.allocated), 1) + " ";
    svg += "<polyline fill=\"none\" stroke-width=\"1\" stroke=\"#999\" points=\"" + used + "\"/>\n";
    for (size_t t = 0; t < x.tenants.size(); ++t) {
      std::string share, fair;
      for (const ShareSample& s : x.samples) {
        const std::string px = fixed(sx((s.start + s.end) / 2), 1);
        share += px + "," + fixed(sy(s.share[t]), 1) + " ";
        fair += px + "," + fixed(sy(s.fair[t]), 1) + " ";
      }
      const std::string color = colors[t % 10];
      svg += "<polyline fill=\"none\" stroke-width=\"1.8\" stroke=\"" + color + "\" points=\"" + share +
             "\"/>\n";
      svg += "<polyline fill=\"none\" stroke-width=\"1.2\" stroke-dasharray=\"5,3\" stroke=\"" + color +
             "\" points=\"" + fair + "\"/>\n";
    }
    left += width + 90;
  }
  double ly = 60;
  if (!r.fifo.empty()) {
    for (size_t t = 0; t < r.fifo.front().tenants.size(); ++t) {
      svg += "<line x1=\"1060\" y1=\"" + fixed(ly, 0) + "\" x2=\"1085\" y2=\"" + fixed(ly, 0) +
             "\" stroke-width=\"3\" stroke=\"" + std::string(colors[t % 10]) + "\"/>\n<text x=\"1090\" y=\"" +
             fixed(ly + 4, 0) + "\" font-size=\"10\">" +
             xmlEscape(tenantLabel(r.fifo.front().tenants[t].spec)) + "</text>\n";
      ly += 18;
    }
    svg += "<line x1=\"1060\" y1=\"" + fixed(ly, 0) + "\" x2=\"1085\" y2=\"" + fixed(ly, 0) +
           "\" stroke-width=\"1\" stroke=\"#999\"/>\n<text x=\"1090\" y=\"" + fixed(ly + 4, 0) +
           "\" font-size=\"10\">GPUs allocated</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace troupe::sim
