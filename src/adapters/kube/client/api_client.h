// Talking to the Kubernetes API server: one request (GET, PATCH, POST with JSON), or a
// streaming GET whose body is read line by line (a watch).
//
// KubeTransport is the seam: the watchers, the binder and the event recorder use it, the tests
// give them a fake, and ApiClient is the real one on cpprestsdk's http_client (TLS through
// OpenSSL, with the endpoint's CA, client certificate and key installed in the ssl context).
// Nothing here throws: every failure is an ApiReply whose `kind` says what happened and
// whether a write may have taken effect anyway.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "adapters/kube/client/kube_config.h"
#include "adapters/kube/runtime/stop_signal.h"
#include "troupe/common/status.h"

namespace troupe::kube {

enum class ApiErrorKind {
  kNone,
  kNotFound,      // 404
  kConflict,      // 409: already exists, already bound, resourceVersion/uid precondition
  kGone,          // 410: resourceVersion too old (relist) or an expired continue token
  kUnauthorized,  // 401
  kForbidden,     // 403: RBAC
  kInvalid,       // 400, 422
  kThrottled,     // 429
  kServer,        // 5xx: the request reached the server; writes may have been applied
  kUnreachable,   // no connection (refused, DNS, TLS handshake): nothing was sent
  kTransport,     // the connection broke or timed out after sending: writes may have been applied
  kCancelled,     // stopped by the caller
  kOther,
};
const char* apiErrorName(ApiErrorKind kind);

struct ApiReply {
  int status = 0;  // HTTP status; 0 when no response arrived
  std::string body;
  ApiErrorKind kind = ApiErrorKind::kOther;
  std::string message;  // what went wrong, from the Status object when there is one

  bool ok() const { return status >= 200 && status < 300; }
  // For writes: the server may have applied it although no success came back.
  bool maybeApplied() const { return kind == ApiErrorKind::kServer || kind == ApiErrorKind::kTransport; }
};

// A reply from an HTTP status and body: kind from the status, message from a v1.Status body.
ApiReply replyFromHttp(int status, std::string body);
// A reply for a failure without a response.
ApiReply replyFromFailure(ApiErrorKind kind, std::string message);
// The core's Status for a failed reply; `what` says what was attempted ("patch pod ns/x").
Status toStatus(const ApiReply& reply, const std::string& what);
// Percent-encodes a query parameter value.
std::string urlEncode(const std::string& value);

class KubeTransport {
 public:
  virtual ~KubeTransport() = default;
  // `path` is absolute from the API root, with its query ("/api/v1/pods?limit=500").
  virtual ApiReply request(const std::string& method, const std::string& path, const std::string& body = "",
                           const std::string& content_type = "application/json") = 0;
  // A streaming GET: `on_line` gets every newline-terminated line of a 200 body until the
  // server ends it, `on_line` returns false, `stop` fires, or nothing arrived for
  // `idle_timeout`. The reply has the status (200 when the stream was read) and, for a
  // non-200 answer, the body.
  virtual ApiReply stream(const std::string& path, std::chrono::seconds idle_timeout,
                          const std::function<bool(std::string&)>& on_line, StopSignal& stop) = 0;
};

struct ApiClientOptions {
  // Per request (a watch has its own). A bind makes three, and kube-scheduler's httpTimeout is
  // typically 30 s.
  std::chrono::seconds request_timeout{10};
  std::string user_agent = "troupe";
};

class ApiClient final : public KubeTransport {
 public:
  // Checks the endpoint (URL) and prepares the TLS settings; no connection yet.
  static Result<std::unique_ptr<ApiClient>> create(ClusterEndpoint endpoint, ApiClientOptions options = {});
  ~ApiClient() override;
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  ApiReply request(const std::string& method, const std::string& path, const std::string& body = "",
                   const std::string& content_type = "application/json") override;
  ApiReply stream(const std::string& path, std::chrono::seconds idle_timeout,
                  const std::function<bool(std::string&)>& on_line, StopSignal& stop) override;

  const ClusterEndpoint& endpoint() const;

 private:
  struct Impl;
  explicit ApiClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::kube
