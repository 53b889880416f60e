// Where the Kubernetes API is and how to authenticate to it: a kubeconfig file, or the
// in-cluster service account.
//
// kubeconfig: the current context (or the one named), its cluster's server, CA
// (certificate-authority-data or certificate-authority, relative paths from the file's
// directory), insecure-skip-tls-verify and tls-server-name, and its user's token, tokenFile,
// client certificate and key (data or file) or username/password. exec and auth-provider
// plugins are refused with a message that says so.
//
// An http:// server is parsed, but checkEndpointSecurity refuses it unless explicitly allowed
// (--allow-insecure-api-server): the bearer token or password, and every pod, would cross the
// network in clear text.
//
// In-cluster: KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT, and the service account's
// token, ca.crt and namespace under /var/run/secrets/kubernetes.io/serviceaccount. The token
// file is re-read whenever it changes (kubelet rotates projected tokens), and at the latest
// every minute.
//
// TLS verification is on unless the kubeconfig explicitly sets insecure-skip-tls-verify. Every
// PEM is parsed here, so a bad certificate or a key that does not match its certificate fails
// at start-up with the file named, not at the first request.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "troupe/common/status.h"

namespace troupe::kube {

// The bearer token for each request. Thread-safe.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual std::string token() = 0;
  // The API server said 401: the next token() re-reads the source.
  virtual void invalidate() {}
  virtual std::string describe() const = 0;
};

class StaticToken final : public TokenSource {
 public:
  explicit StaticToken(std::string token) : token_(std::move(token)) {}
  std::string token() override { return token_; }
  std::string describe() const override { return "static token"; }

 private:
  const std::string token_;
};

// A token in a file: re-read when the file's modification time or size changes, when
// invalidated, or when `max_age` has passed since the last read.
class FileToken final : public TokenSource {
 public:
  explicit FileToken(std::filesystem::path path, std::chrono::seconds max_age = std::chrono::seconds(60));
  std::string token() override;
  void invalidate() override;
  std::string describe() const override { return "token file " + path_.string(); }
  // Reads the file now; the error names it.
  Status load();

 private:
  const std::filesystem::path path_;
  const std::chrono::seconds max_age_;
  std::mutex mu_;
  std::string token_;
  std::filesystem::file_time_type mtime_{};
  uintmax_t size_ = 0;
  std::chrono::steady_clock::time_point read_at_{};
  bool stale_ = true;
};

struct ClusterEndpoint {
  std::string server;  // https://host:port[/prefix], no trailing slash
  std::string ca_pem;  // empty: the system's trust store
  bool insecure_skip_verify = false;
  std::string tls_server_name;  // "" = the server's host
  std::string client_cert_pem;  // client certificate authentication
  std::string client_key_pem;
  std::shared_ptr<TokenSource> token;  // bearer token authentication (may be null)
  std::string basic_auth;              // "user:password" (may be empty)
  std::string ns = "default";          // the context's or service account's namespace
  std::string source;                  // where it came from, for logs: "kubeconfig FILE (context C)"
};

// Parses kubeconfig text. `base_dir` resolves relative file references; `context` "" means
// current-context. Errors name the file and the entry at fault.
Result<ClusterEndpoint> parseKubeconfig(const std::string& text, const std::string& source_name,
                                        const std::filesystem::path& base_dir,
                                        const std::string& context = "");
Result<ClusterEndpoint> loadKubeconfig(const std::string& path, const std::string& context = "");

// What Troupe checks before it talks to `endpoint`: an http:// server is refused with a
// message that names the flag, unless `allow_http`. Returns the warnings to log: an allowed
// http:// server, and insecure-skip-tls-verify (the server's certificate is not checked, so
// anyone on the path can pose as the API server and read the credentials).
Result<std::vector<std::string>> checkEndpointSecurity(const ClusterEndpoint& endpoint, bool allow_http);

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct InClusterEnv {
  std::string host;  // KUBERNETES_SERVICE_HOST
  std::string port;  // KUBERNETES_SERVICE_PORT
  std::filesystem::path service_account_dir = kServiceAccountDir;
};

// The in-cluster environment of this process, or nullopt when KUBERNETES_SERVICE_HOST is not
// set. TROUPE_SERVICEACCOUNT_DIR overrides the service account directory (for tests).
std::optional<InClusterEnv> detectInCluster();
Result<ClusterEndpoint> inClusterEndpoint(const InClusterEnv& env);

// Base64 (standard alphabet, padding optional, whitespace ignored).
Result<std::string> decodeBase64(const std::string& text);
// Standard base64 with '=' padding (HTTP basic auth; tests build kubeconfig data with it).
std::string encodeBase64(const std::string& bytes);
// Checks that `pem` holds at least one certificate; `what` names it in the error.
Status checkCertificates(const std::string& pem, const std::string& what);
// Checks the key and that it belongs to the certificate.
Status checkKeyPair(const std::string& cert_pem, const std::string& key_pem, const std::string& what);

}  // namespace troupe::kube
