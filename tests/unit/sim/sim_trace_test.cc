// The openb trace parser: good files, the 5-column variant, and errors that say where and what.
#include <catch2/catch.hpp>

#include "support/fixtures.h"
#include "troupe/sim/trace.h"

namespace {

using troupe::sim::parseNodeCsv;
using troupe::sim::parsePodCsv;

TEST_CASE("node lists parse by header name") {
  auto nodes = parseNodeCsv(
      "sn,cpu_milli,memory_mib,gpu,model\nn-1,64000,262144,2,P100\r\n\nn-0,96000,1024,8,G2\n", "nodes.csv");
  REQUIRE(nodes.isOk());
  REQUIRE(nodes.value().size() == 2);
  CHECK(nodes.value()[0].name == "n-1");
  CHECK(nodes.value()[0].cpu_milli == 64000);
  CHECK(nodes.value()[0].memory_mib == 262144);
  CHECK(nodes.value()[1].gpus == 8);
  CHECK(nodes.value()[1].model == "G2");
}

TEST_CASE("pod lists: full and 5-column variants, gpu_milli clamped, spec only on GPU pods") {
  auto full = parsePodCsv(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
      "p-0,12000,16384,1,460,V100M16|V100M32,LS\n"
      "p-1,4000,100,0,0,T4,BE\n"
      "p-2,8000,100,2,1200,,LS\n",
      "pods.csv");
  REQUIRE(full.isOk());
  CHECK(full.value()[0].gpu_spec == "V100M16|V100M32");
  CHECK(full.value()[0].gpuRequestMilli() == 460);
  CHECK(full.value()[1].gpu_spec.empty());
  CHECK(full.value()[2].gpu_milli == 1000);
  CHECK(full.value()[2].gpuRequestMilli() == 2000);
  auto five = parsePodCsv("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-0,1,2,8,1000\n", "m.csv");
  REQUIRE(five.isOk());
  CHECK(five.value()[0].num_gpu == 8);
}

TEST_CASE("trace errors name the file, line, column and the fix") {
  auto bad_cell = parseNodeCsv("sn,cpu_milli,memory_mib,gpu,model\nn-0,64000,262144,two,P100\n", "nodes.csv");
  REQUIRE_FALSE(bad_cell.isOk());
  CHECK(bad_cell.status().message() ==
        "nodes.csv:2, column 4 (gpu): \"two\" must be a whole number from 0 to 64");

  auto missing = parsePodCsv("name,cpu_milli,num_gpu,gpu_milli\np,1,1,1\n", "pods.csv");
  REQUIRE_FALSE(missing.isOk());
  CHECK_THAT(missing.status().message(),
             Catch::Contains("pods.csv:1: the header lacks column \"memory_mib\""));

  auto short_row = parsePodCsv("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,2,1\n", "pods.csv");
  REQUIRE_FALSE(short_row.isOk());
  CHECK_THAT(short_row.status().message(), Catch::Contains("pods.csv:2: has 4 cells, but the header has 5"));

  auto no_milli = parsePodCsv("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,2,1,0\n", "pods.csv");
  REQUIRE_FALSE(no_milli.isOk());
  CHECK_THAT(no_milli.status().message(), Catch::Contains("pods.csv:2, column 5 (gpu_milli)"));

  auto twice = parseNodeCsv("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,1,T4\nn,1,1,1,T4\n", "nodes.csv");
  REQUIRE_FALSE(twice.isOk());
  CHECK_THAT(twice.status().message(),
             Catch::Contains("nodes.csv:3, column 1 (sn): node \"n\" is listed twice"));

  auto no_model = parseNodeCsv("sn,cpu_milli,memory_mib,gpu,model\nn,1,1,2,\n", "nodes.csv");
  REQUIRE_FALSE(no_model.isOk());
  CHECK_THAT(no_model.status().message(), Catch::Contains("column 5 (model)"));

  CHECK_FALSE(parseNodeCsv("", "empty.csv").isOk());
}

TEST_CASE("the bundled example trace parses") {
  const std::string dir = troupe::testing::sourceDir() + "/examples/trace/";
  auto nodes = troupe::testing::readFile(dir + "nodes.csv");
  auto pods = troupe::testing::readFile(dir + "pods.csv");
  REQUIRE(nodes);
  REQUIRE(pods);
  CHECK(parseNodeCsv(*nodes, "nodes.csv").isOk());
  CHECK(parsePodCsv(*pods, "pods.csv").isOk());
}

}  // namespace
