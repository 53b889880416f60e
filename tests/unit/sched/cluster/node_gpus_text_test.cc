// troupe_node_gpus written straight from the node rows: the exposition format's grouping
// (HELP and TYPE once, before the series), escaped label values, and values that read back.
#include "adapters/metrics/node_gpus_text.h"

#include <catch2/catch.hpp>

using troupe::metrics::appendNodeGpus;
using troupe::sched::ClusterSummary;

TEST_CASE("node gpus text: three series per node, after HELP and TYPE", "[metrics]") {
  std::vector<ClusterSummary::NodeRow> rows = {{"h1", "NVIDIA-H100-80GB-HBM3", 8, 3500, 1},
                                               {"h2", "NVIDIA-H100-80GB-HBM3", 8, 125, 1}};
  std::string text = "troupe_gpu_pods 2\n";
  appendNodeGpus(rows, text);
  CHECK(text ==
        "troupe_gpu_pods 2\n"
        "# HELP troupe_node_gpus GPUs of one node in Troupe's model, by state: total, allocated "
        "(GPU-equivalents held, shares counted in thousandths), shared (GPUs split between pods).\n"
        "# TYPE troupe_node_gpus gauge\n"
        "troupe_node_gpus{node=\"h1\",product=\"NVIDIA-H100-80GB-HBM3\",state=\"total\"} 8\n"
        "troupe_node_gpus{node=\"h1\",product=\"NVIDIA-H100-80GB-HBM3\",state=\"allocated\"} 3.5\n"
        "troupe_node_gpus{node=\"h1\",product=\"NVIDIA-H100-80GB-HBM3\",state=\"shared\"} 1\n"
        "troupe_node_gpus{node=\"h2\",product=\"NVIDIA-H100-80GB-HBM3\",state=\"total\"} 8\n"
        "troupe_node_gpus{node=\"h2\",product=\"NVIDIA-H100-80GB-HBM3\",state=\"allocated\"} 0.125\n"
        "troupe_node_gpus{node=\"h2\",product=\"NVIDIA-H100-80GB-HBM3\",state=\"shared\"} 1\n");
}

TEST_CASE("node gpus text: no rows, no family", "[metrics]") {
  std::string text = "x 1\n";
  appendNodeGpus({}, text);
  CHECK(text == "x 1\n");
}

TEST_CASE("node gpus text: label values are escaped", "[metrics][security]") {
  // Product names come from node labels (or, in learn mode, from request bodies).
  std::string text;
  appendNodeGpus({{"n\\1", "a\"b\nc", 2, 0, 0}}, text);
  CHECK(text.find("troupe_node_gpus{node=\"n\\\\1\",product=\"a\\\"b\\nc\",state=\"total\"} 2\n") !=
        std::string::npos);
  // Every series is one line: 2 comment lines and 3 series.
  CHECK(std::count(text.begin(), text.end(), '\n') == 5);
}
