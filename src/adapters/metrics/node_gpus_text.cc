#include "adapters/metrics/node_gpus_text.h"

#include <charconv>
#include <string_view>

namespace troupe::metrics {
namespace {

// Backslash, double quote and line feed are the characters a label value must escape.
void appendLabelValue(std::string_view value, std::string& out) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

// The shortest text that reads back as the same double (8, 3.5, 0.125), as prometheus-cpp
// writes values.
void appendValue(double value, std::string& out) {
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, r.ptr);
}

}  // namespace

void appendNodeGpus(const std::vector<sched::ClusterSummary::NodeRow>& rows, std::string& out) {
  if (rows.empty()) return;
  out +=
      "# HELP troupe_node_gpus GPUs of one node in Troupe's model, by state: total, allocated "
      "(GPU-equivalents held, shares counted in thousandths), shared (GPUs split between pods).\n"
      "# TYPE troupe_node_gpus gauge\n";
  out.reserve(out.size() + rows.size() * 3 * (rows.front().node.size() + rows.front().product.size() + 64));
  std::string labels;  // troupe_node_gpus{node="...",product="...",state="
  for (const sched::ClusterSummary::NodeRow& row : rows) {
    labels = "troupe_node_gpus{node=\"";
    appendLabelValue(row.node, labels);
    labels += "\",product=\"";
    appendLabelValue(row.product, labels);
    labels += "\",state=\"";
    out += labels;
    out += "total\"} ";
    appendValue(row.gpus, out);
    out += '\n';
    out += labels;
    out += "allocated\"} ";
    appendValue(static_cast<double>(row.used_milli) / 1000.0, out);
    out += '\n';
    out += labels;
    out += "shared\"} ";
    appendValue(row.shared_gpus, out);
    out += '\n';
  }
}

}  // namespace troupe::metrics
