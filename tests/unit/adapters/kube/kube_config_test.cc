// Kubeconfig and in-cluster configuration: contexts, CA data and files, client certificates,
// tokens (and their rotation), insecure-skip-tls-verify, and the errors for bad input.
#include "adapters/kube/client/kube_config.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "adapters/kube/client/api_client.h"
#include "support/kube_test_support.h"

namespace {

namespace fs = std::filesystem;
using troupe::Code;
using troupe::kube::ClusterEndpoint;
using troupe::kube::decodeBase64;
using troupe::kube::parseKubeconfig;
using troupe::kube::testing::base64;
using troupe::kube::testing::makeSelfSigned;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("troupe-kube-test-" + std::to_string(::getpid()) + "-" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
  }
};

std::string config(const std::string& cluster, const std::string& user, const std::string& extra = "") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: main\n" + extra +
         "contexts:\n"
         "- name: main\n  context: {cluster: c1, user: u1, namespace: ml}\n"
         "- name: other\n  context: {cluster: c2, user: u1}\n"
         "clusters:\n"
         "- name: c1\n  cluster:\n" +
         cluster +
         "- name: c2\n  cluster:\n    server: https://other.example:6443/\n    insecure-skip-tls-verify: "
         "true\n"
         "users:\n"
         "- name: u1\n  user:\n" +
         user;
}

}  // namespace

TEST_CASE("kubeconfig: current context, CA data, static token", "[kube][config]") {
  const auto ca = makeSelfSigned("test-ca");
  const std::string text = config(
      "    server: https://10.0.0.1:6443\n    certificate-authority-data: " + base64(ca.cert_pem) + "\n",
      "    token: abc123\n");
  auto ep = parseKubeconfig(text, "kc.yaml", ".");
  INFO(ep.status().message());
  REQUIRE(ep.isOk());
  CHECK(ep.value().server == "https://10.0.0.1:6443");
  CHECK(ep.value().ca_pem == ca.cert_pem);
  CHECK_FALSE(ep.value().insecure_skip_verify);
  CHECK(ep.value().ns == "ml");
  REQUIRE(ep.value().token);
  CHECK(ep.value().token->token() == "abc123");
  CHECK(ep.value().source.find("context main") != std::string::npos);
}

TEST_CASE("kubeconfig: an explicit context, insecure-skip-tls-verify, trailing slash", "[kube][config]") {
  const std::string text = config("    server: https://10.0.0.1:6443\n", "    token: t\n");
  auto ep = parseKubeconfig(text, "kc.yaml", ".", "other");
  INFO(ep.status().message());
  REQUIRE(ep.isOk());
  CHECK(ep.value().server == "https://other.example:6443");
  CHECK(ep.value().insecure_skip_verify);
  CHECK(ep.value().ns == "default");
  CHECK(ep.value().ca_pem.empty());  // the system trust store
}

TEST_CASE("kubeconfig: an http:// API server is refused unless allowed (security review K4)",
          "[kube][config][security]") {
  using troupe::kube::checkEndpointSecurity;
  const std::string text = config("    server: http://127.0.0.1:8001\n", "    token: s3cr3t\n");
  auto ep = parseKubeconfig(text, "kc.yaml", ".");
  REQUIRE(ep.isOk());  // it parses: the refusal is a policy, with its own flag
  auto refused = checkEndpointSecurity(ep.value(), /*allow_http=*/false);
  REQUIRE_FALSE(refused.isOk());
  CHECK(refused.status().code() == Code::kInvalidArgument);
  CHECK_THAT(refused.status().message(), Catch::Contains("http://127.0.0.1:8001") &&
                                             Catch::Contains("token or password") &&
                                             Catch::Contains("--allow-insecure-api-server"));
  CHECK(refused.status().message().find("s3cr3t") == std::string::npos);  // never echoes the token
  auto allowed = checkEndpointSecurity(ep.value(), /*allow_http=*/true);
  REQUIRE(allowed.isOk());
  REQUIRE(allowed.value().size() == 1);
  CHECK_THAT(allowed.value()[0], Catch::Contains("allowed by --allow-insecure-api-server"));
}

TEST_CASE("kubeconfig: insecure-skip-tls-verify is accepted with a warning; verified https without one",
          "[kube][config][security]") {
  using troupe::kube::checkEndpointSecurity;
  const std::string text = config("    server: https://10.0.0.1:6443\n", "    token: t\n");
  auto skipping = parseKubeconfig(text, "kc.yaml", ".", "other");
  REQUIRE(skipping.isOk());
  auto warned = checkEndpointSecurity(skipping.value(), false);
  REQUIRE(warned.isOk());
  REQUIRE(warned.value().size() == 1);
  CHECK_THAT(warned.value()[0], Catch::Contains("insecure-skip-tls-verify") &&
                                    Catch::Contains("https://other.example:6443") &&
                                    Catch::Contains("certificate-authority"));
  auto verified = parseKubeconfig(text, "kc.yaml", ".");
  REQUIRE(verified.isOk());
  auto quiet = checkEndpointSecurity(verified.value(), false);
  REQUIRE(quiet.isOk());
  CHECK(quiet.value().empty());
}

TEST_CASE("kubeconfig: files relative to the kubeconfig, client certificate and key", "[kube][config]") {
  TempDir dir;
  const auto ca = makeSelfSigned("test-ca");
  const auto client = makeSelfSigned("test-client");
  dir.write("ca.crt", ca.cert_pem);
  dir.write("client.crt", client.cert_pem);
  dir.write("client.key", client.key_pem);
  dir.write("token", "file-token\n");
  dir.write("kc.yaml", config("    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\n"
                              "    tls-server-name: kubernetes\n",
                              "    client-certificate: client.crt\n    client-key: " +
                                  (dir.path / "client.key").string() + "\n    tokenFile: token\n"));
  auto ep = troupe::kube::loadKubeconfig((dir.path / "kc.yaml").string());
  INFO(ep.status().message());
  REQUIRE(ep.isOk());
  CHECK(ep.value().ca_pem == ca.cert_pem);
  CHECK(ep.value().client_cert_pem == client.cert_pem);
  CHECK(ep.value().client_key_pem == client.key_pem);
  CHECK(ep.value().tls_server_name == "kubernetes");
  REQUIRE(ep.value().token);
  CHECK(ep.value().token->token() == "file-token");
}

TEST_CASE("kubeconfig: client certificate data", "[kube][config]") {
  const auto client = makeSelfSigned("test-client");
  const std::string text = config("    server: https://127.0.0.1:6443\n",
                                  "    client-certificate-data: " + base64(client.cert_pem) +
                                      "\n    client-key-data: " + base64(client.key_pem) + "\n");
  auto ep = parseKubeconfig(text, "kc.yaml", ".");
  INFO(ep.status().message());
  REQUIRE(ep.isOk());
  CHECK(ep.value().client_cert_pem == client.cert_pem);
  CHECK_FALSE(ep.value().token);
}

TEST_CASE("kubeconfig: errors name the file, the entry and what is wrong", "[kube][config]") {
  const auto ca = makeSelfSigned("test-ca");
  const auto a = makeSelfSigned("a");
  const auto b = makeSelfSigned("b");
  auto error = [](const std::string& text, const std::string& context = "") {
    auto ep = parseKubeconfig(text, "bad.yaml", "/nonexistent", context);
    REQUIRE_FALSE(ep.isOk());
    CHECK(ep.status().message().find("bad.yaml") != std::string::npos);
    return ep.status().message();
  };
  CHECK(error("clusters: [").find("not valid YAML") != std::string::npos);
  CHECK(error("- a\n- b\n").find("not a kubeconfig") != std::string::npos);
  CHECK(error(config("    server: https://x\n", "    token: t\n"), "missing").find("context \"missing\"") !=
        std::string::npos);
  CHECK(error("apiVersion: v1\nkind: Config\n").find("no current-context") != std::string::npos);
  CHECK(error(config("    insecure-skip-tls-verify: true\n", "    token: t\n")).find("has no server") !=
        std::string::npos);
  CHECK(error(config("    server: ftp://x\n", "    token: t\n")).find("must start with https://") !=
        std::string::npos);
  CHECK(error(config("    server: https://x\n    certificate-authority-data: '%%%'\n", "    token: t\n"))
            .find("not valid base64") != std::string::npos);
  CHECK(error(config("    server: https://x\n    certificate-authority-data: " + base64("hello") + "\n",
                     "    token: t\n"))
            .find("holds no PEM certificate") != std::string::npos);
  CHECK(error(config("    server: https://x\n    certificate-authority: missing-ca.crt\n", "    token: t\n"))
            .find("/nonexistent/missing-ca.crt") != std::string::npos);
  CHECK(
      error(
          config(
              "    server: https://x\n    insecure-skip-tls-verify: true\n    certificate-authority-data: " +
                  base64(ca.cert_pem) + "\n",
              "    token: t\n"))
          .find("insecure-skip-tls-verify") != std::string::npos);
  CHECK(error(config("    server: https://x\n    insecure-skip-tls-verify: maybe\n", "    token: t\n"))
            .find("true or false") != std::string::npos);
  CHECK(
      error(config("    server: https://x\n", "    exec: {command: aws}\n")).find("exec credential plugin") !=
      std::string::npos);
  CHECK(error(config("    server: https://x\n", "    client-certificate-data: " + base64(a.cert_pem) +
                                                    "\n    client-key-data: " + base64(b.key_pem) + "\n"))
            .find("does not belong to the certificate") != std::string::npos);
  CHECK(error(config("    server: https://x\n", "    client-certificate-data: " + base64(a.cert_pem) + "\n"))
            .find("without a key") != std::string::npos);
  CHECK(error(config("    server: https://x\n", "    tokenFile: /nonexistent/token\n"))
            .find("/nonexistent/token") != std::string::npos);
}

TEST_CASE("kubeconfig: a missing file says so", "[kube][config]") {
  auto ep = troupe::kube::loadKubeconfig("/nonexistent/kubeconfig");
  REQUIRE_FALSE(ep.isOk());
  CHECK(ep.status().message().find("/nonexistent/kubeconfig") != std::string::npos);
}

TEST_CASE("base64 decoding", "[kube][config]") {
  CHECK(decodeBase64("aGVsbG8=").value() == "hello");
  CHECK(decodeBase64("aGVsbG8").value() == "hello");
  CHECK(decodeBase64("aGVs\nbG8=\n").value() == "hello");
  CHECK(decodeBase64("").value().empty());
  CHECK_FALSE(decodeBase64("aGVs*G8=").isOk());
  CHECK_FALSE(decodeBase64("a").isOk());
}

TEST_CASE("in-cluster: service account token, CA and namespace; the token is re-read when it rotates",
          "[kube][config]") {
  TempDir dir;
  const auto ca = makeSelfSigned("cluster-ca");
  dir.write("token", "token-1");
  dir.write("ca.crt", ca.cert_pem);
  dir.write("namespace", "troupe-system\n");
  troupe::kube::InClusterEnv env{"10.96.0.1", "443", dir.path};
  auto ep = troupe::kube::inClusterEndpoint(env);
  INFO(ep.status().message());
  REQUIRE(ep.isOk());
  CHECK(ep.value().server == "https://10.96.0.1:443");
  CHECK(ep.value().ns == "troupe-system");
  CHECK(ep.value().ca_pem == ca.cert_pem);
  REQUIRE(ep.value().token);
  CHECK(ep.value().token->token() == "token-1");
  // The kubelet writes a new token (a new file, so a new modification time or size).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  dir.write("token", "token-2-rotated");
  CHECK(ep.value().token->token() == "token-2-rotated");
  // A 401 forces a re-read even when the file looks unchanged.
  const auto before = fs::last_write_time(dir.path / "token");
  dir.write("token", "token-3-rotated");  // same size, and the old modification time
  fs::last_write_time(dir.path / "token", before);
  CHECK(ep.value().token->token() == "token-2-rotated");  // looks unchanged: cached
  ep.value().token->invalidate();
  CHECK(ep.value().token->token() == "token-3-rotated");
  // A briefly missing file keeps the last good token.
  fs::remove(dir.path / "token");
  ep.value().token->invalidate();
  CHECK(ep.value().token->token() == "token-3-rotated");

  troupe::kube::InClusterEnv v6{"fd00::1", "6443", dir.path};
  dir.write("token", "t");
  auto ep6 = troupe::kube::inClusterEndpoint(v6);
  REQUIRE(ep6.isOk());
  CHECK(ep6.value().server == "https://[fd00::1]:6443");
}

TEST_CASE("in-cluster: a missing token or CA is a clear error", "[kube][config]") {
  TempDir dir;
  troupe::kube::InClusterEnv env{"10.96.0.1", "443", dir.path};
  auto ep = troupe::kube::inClusterEndpoint(env);
  REQUIRE_FALSE(ep.isOk());
  CHECK(ep.status().message().find("token") != std::string::npos);
  dir.write("token", "t");
  ep = troupe::kube::inClusterEndpoint(env);
  REQUIRE_FALSE(ep.isOk());
  CHECK(ep.status().message().find("ca.crt") != std::string::npos);
}

TEST_CASE("API replies: kinds, messages and Status codes", "[kube][config]") {
  using troupe::kube::ApiErrorKind;
  auto r =
      troupe::kube::replyFromHttp(404, R"({"kind":"Status","message":"pods \"x\" not found","code":404})");
  CHECK(r.kind == ApiErrorKind::kNotFound);
  CHECK(r.message.find("pods \"x\" not found") != std::string::npos);
  CHECK(troupe::kube::toStatus(r, "read pod").code() == Code::kNotFound);
  CHECK(troupe::kube::replyFromHttp(409, "{}").kind == ApiErrorKind::kConflict);
  CHECK(troupe::kube::replyFromHttp(410, "{}").kind == ApiErrorKind::kGone);
  CHECK(troupe::kube::replyFromHttp(503, "unavailable").maybeApplied());
  CHECK(troupe::kube::toStatus(troupe::kube::replyFromHttp(503, ""), "x").code() == Code::kUnavailable);
  CHECK(troupe::kube::toStatus(troupe::kube::replyFromHttp(403, "{}"), "x").message().find("rbac.yaml") !=
        std::string::npos);
  CHECK_FALSE(troupe::kube::replyFromFailure(ApiErrorKind::kUnreachable, "refused").maybeApplied());
  CHECK(troupe::kube::urlEncode("status.phase!=Succeeded,a=b") == "status.phase%21%3DSucceeded%2Ca%3Db");
}

TEST_CASE("kubeconfig: referenced files must be regular files of at most 16 MiB", "[kube][config][hostile]") {
  TempDir dir;
  fs::create_directories(dir.path / "ca-dir");
  // A directory read as "" before: the cluster silently fell back to the system trust store.
  auto r = parseKubeconfig(
      config("    server: https://h:6443\n    certificate-authority: ca-dir\n", "    token: t\n"), "kc",
      dir.path);
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(r.status().message(), Catch::Contains("ca-dir"));
  CHECK_THAT(r.status().message(), Catch::Contains("not a regular file"));
  // A device was read until memory ran out (not run on the old code for that reason).
  r = parseKubeconfig(config("    server: https://h:6443\n", "    tokenFile: /dev/zero\n"), "kc", dir.path);
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(r.status().message(), Catch::Contains("/dev/zero"));
  CHECK_THAT(r.status().message(), Catch::Contains("not a regular file"));
  // Far larger than any certificate: refused before it is read (sparse, so the test writes nothing).
  { std::ofstream create(dir.path / "big.crt"); }
  fs::resize_file(dir.path / "big.crt", 17u << 20);
  r = parseKubeconfig(
      config("    server: https://h:6443\n    certificate-authority: big.crt\n", "    token: t\n"), "kc",
      dir.path);
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(r.status().message(), Catch::Contains("larger than 16 MiB"));
}
