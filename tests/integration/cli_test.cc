// The troupe binary as a user meets it: help, version, and errors that say what to fix.
#include <sys/wait.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

struct Run {
  int code;
  std::string output;
};

Run troupe(const std::string& args) {
  const char* bin = std::getenv("TROUPE_BINARY");
  REQUIRE(bin != nullptr);
  std::string cmd = std::string(bin) + " " + args + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string tempFile(const std::string& name, const std::string& text) {
  std::string path = "/tmp/troupe-cli-test-" + std::to_string(::getpid()) + "-" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("help teaches the commands and the pod annotations", "[cli]") {
  Run r = troupe("--help");
  CHECK(r.code == 0);
  CHECK(r.output.find("troupe serve") != std::string::npos);
  CHECK(r.output.find("troupe.dev/gpu-topology") != std::string::npos);
  Run serve = troupe("serve --help");
  CHECK(serve.code == 0);
  CHECK(serve.output.find("--cluster FILE") != std::string::npos);
  CHECK(serve.output.find("--metrics-listen HOST:PORT") != std::string::npos);
  CHECK(troupe("version").output.find("troupe ") == 0);
}

TEST_CASE("usage errors exit 2 and name the problem", "[cli]") {
  Run unknown = troupe("frobnicate");
  CHECK(unknown.code == 2);
  CHECK(unknown.output.find("frobnicate") != std::string::npos);

  Run bad_listen = troupe("serve --listen nowhere");
  CHECK(bad_listen.code == 2);
  CHECK(bad_listen.output.find("--listen \"nowhere\" must be HOST:PORT") != std::string::npos);

  Run bad_metrics = troupe("serve --metrics-listen 0.0.0.0");
  CHECK(bad_metrics.code == 2);
  CHECK(bad_metrics.output.find("--metrics-listen \"0.0.0.0\" must be HOST:PORT") != std::string::npos);
  Run same_port = troupe("serve --listen 127.0.0.1:18888 --metrics-listen 127.0.0.1:18888");
  CHECK(same_port.code == 2);
  CHECK(same_port.output.find("choose another port") != std::string::npos);

  Run bad_flag = troupe("serve --bogus 1");
  CHECK(bad_flag.code == 2);
  CHECK(bad_flag.output.find("--bogus") != std::string::npos);
}

TEST_CASE("config and cluster errors name the file, line and key", "[cli][config]") {
  std::string cfg =
      tempFile("config.yaml", "listen: 127.0.0.1:1\npolicy:\n  name: troupe\n  wieghts: {pack: 1}\n");
  Run r = troupe("serve --config " + cfg);
  CHECK(r.code == 2);
  CHECK(r.output.find(cfg + ":4: policy.wieghts: unknown key") != std::string::npos);

  std::string cluster = tempFile("cluster.yaml", "nodes:\n  - name: a\n    gpus: lots\n");
  Run c = troupe("serve --listen 127.0.0.1:1 --cluster " + cluster);
  CHECK(c.code == 2);
  CHECK(c.output.find(cluster + ":3: nodes[0].gpus") != std::string::npos);

  Run missing = troupe("serve --cluster /nonexistent/cluster.yaml");
  CHECK(missing.code == 2);
  CHECK(missing.output.find("/nonexistent/cluster.yaml") != std::string::npos);
}

TEST_CASE("filter narrowing is chosen by config or flag, and a bad choice says what is accepted",
          "[cli][config]") {
  std::string cfg = tempFile("narrow.yaml", "listen: 127.0.0.1:1\nfilter:\n  narrowTo: first\n");
  Run r = troupe("serve --config " + cfg);
  CHECK(r.code == 2);
  CHECK(r.output.find(cfg + ":3: filter.narrowTo") != std::string::npos);
  CHECK(r.output.find("use best") != std::string::npos);

  std::string typo = tempFile("narrow-key.yaml", "filter:\n  narrow: best\n");
  Run k = troupe("serve --config " + typo);
  CHECK(k.code == 2);
  CHECK(k.output.find(typo + ":2: filter.narrow: unknown key") != std::string::npos);

  Run flag = troupe("serve --listen 127.0.0.1:1 --narrow-to most");
  CHECK(flag.code == 2);
  CHECK(flag.output.find("--narrow-to \"most\" is not a choice") != std::string::npos);
  CHECK(troupe("serve --help").output.find("--narrow-to best|all") != std::string::npos);
}

TEST_CASE("simulate --in-order writes every pod's node in file order", "[cli][sim]") {
  const char* src = std::getenv("TROUPE_SOURCE_DIR");
  REQUIRE(src != nullptr);
  std::string placements = "/tmp/troupe-cli-test-" + std::to_string(::getpid()) + "-placements.csv";
  Run r = troupe(std::string("simulate --in-order --policy troupe --seeds 1 --json --nodes ") + src +
                 "/examples/trace/nodes.csv --pods " + src + "/examples/trace/pods.csv --placements " +
                 placements);
  INFO(r.output);
  REQUIRE(r.code == 0);
  std::ifstream in(placements);
  std::string line;
  std::getline(in, line);
  CHECK(line == "policy,seed,pod,node");
  std::getline(in, line);
  CHECK(line.rfind("troupe,42,example-pod-0000,", 0) == 0);  // the file's first pod comes first
  int rows = 1;
  while (std::getline(in, line)) ++rows;
  std::ifstream pods(std::string(src) + "/examples/trace/pods.csv");
  int pod_rows = -1;  // the header
  while (std::getline(pods, line)) pod_rows += line.empty() ? 0 : 1;
  CHECK(rows == pod_rows);  // once each, no clones
}

TEST_CASE("an http:// API server is refused unless --allow-insecure-api-server says so", "[cli][security]") {
  std::string kc = tempFile("http-kubeconfig",
                            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                            "clusters: [{name: k, cluster: {server: \"http://127.0.0.1:1\"}}]\n"
                            "users: [{name: u, user: {token: s3cr3t}}]\n"
                            "contexts: [{name: c, context: {cluster: k, user: u}}]\n");
  Run r = troupe("serve --listen 127.0.0.1:1 --kubeconfig " + kc);
  CHECK(r.code == 2);
  CHECK(r.output.find("http://127.0.0.1:1") != std::string::npos);
  CHECK(r.output.find("--allow-insecure-api-server") != std::string::npos);
  CHECK(r.output.find("s3cr3t") == std::string::npos);

  Run alone = troupe("serve --listen 127.0.0.1:1 --allow-insecure-api-server");
  CHECK(alone.code == 2);
  CHECK(alone.output.find("needs the Kubernetes API") != std::string::npos);

  Run name = troupe("serve --listen 127.0.0.1:1 --scheduler-name Troupe_Scheduler");
  CHECK(name.code == 2);
  CHECK(name.output.find("--scheduler-name \"Troupe_Scheduler\" is not a scheduler profile name") !=
        std::string::npos);
  CHECK(troupe("serve --help").output.find("--scheduler-name NAME") != std::string::npos);
}
