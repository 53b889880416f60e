// The HTTP face of Troupe: kube-scheduler's extender verbs plus health and metrics.
//
//   POST /filter /prioritize /bind /preempt   (kube-scheduler's urlPrefix is http://HOST:PORT)
//   GET  /healthz   the process answers
//   GET  /readyz    the model is usable (standalone: always; with a cluster watch: synced)
//   GET  /metrics   Prometheus text format
//
// A second listener may serve only the three GET endpoints (serve --metrics-listen), so the
// verbs can stay on loopback while probes and Prometheus use the pod IP.
//
// ExtenderHandler turns (method, path, body) into a response and is tested without sockets;
// ExtenderServer puts it on an HTTP/1.1 listener (Boost.Beast over Asio, optionally TLS with
// client certificates; docs/http-server.md says why and how it bounds memory and time).
// Logical failures are HTTP 200 with the protocol's Error field; malformed bodies are 400 with
// {"error": "..."} naming the problem; bodies over the limit are 413. The handler never throws:
// an exception anywhere in a request (the bind continuation included) is answered 500 and
// reported through HandlerOptions::internal_errors.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "adapters/common/connection_events.h"
#include "adapters/common/extender_metrics.h"
#include "adapters/common/internal_errors.h"
#include "adapters/common/logger.h"
#include "adapters/http/wire.h"
#include "troupe/common/status.h"
#include "troupe/sched/scheduler/pod_binder.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::http {

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// Called with where an exception was caught ("http") each time one is, so it can be counted
// (troupe_internal_errors_total{where}). Must not throw.

struct HandlerOptions {
  size_t max_body_bytes = 64 << 20;          // a 5,000-node full NodeList is ~20 MiB
  std::string record_dir;                    // when set, every extender request body is saved here
  adapters::InternalErrors internal_errors;  // where="http" (troupe_internal_errors_total)
};

using Reply = std::function<void(HttpResponse)>;

// What a listener serves: everything, or only GET /healthz, /readyz and /metrics.
enum class Endpoints { kAll, kProbesOnly };

class ExtenderHandler {
 public:
  ExtenderHandler(HandlerOptions options, sched::Scheduler& scheduler, adapters::ExtenderMetrics& metrics,
                  adapters::Logger& logger);

  // Answers through `reply`, exactly once. Binds of gang members answer only when the whole
  // gang has arrived (or its timeout passed), so the server must not block a thread on them.
  void handleAsync(const std::string& method, const std::string& path, const std::string& body, Reply reply,
                   Endpoints endpoints = Endpoints::kAll);
  // The same, waiting for the answer (tests, and callers that own a thread per request).
  HttpResponse handle(const std::string& method, const std::string& path, const std::string& body,
                      Endpoints endpoints = Endpoints::kAll);
  // Troupe's answer to a call it gives up on while shutting down (`why` says what was pending):
  // binds and filters get the protocol's Error (kube-scheduler retries the pod), the rest 503.
  static HttpResponse shuttingDown(const std::string& path, const std::string& why);
  // The 413 for a body over maxBodyBytes, known from its declared length (`declared`) or found
  // while reading a chunked one (nullopt); counted like any other bad request.
  HttpResponse tooLarge(const std::string& path, std::optional<uint64_t> declared);
  // Logs and counts an exception caught at `where` on the request path; the 500 to send.
  HttpResponse internalError(std::string_view where, const std::string& path, const char* what);
  // Not owned; it must outlive every bind in flight. When set, it does the whole bind
  // (Kubernetes mode); otherwise the bind reserves the GPUs with Scheduler::bind (standalone).
  void setBinder(sched::PodBinder* binder) { binder_ = binder; }
  // Reads the PodGroup a pod's gang is named by, before the pod is filtered (the core never
  // waits on the API). Set before serving; what it calls must outlive every request.
  // `native` reads Kubernetes' own PodGroups (spec.schedulingGroup), `lookup` scheduler-plugins'.
  void setPodGroups(sched::PodGroupLookup lookup, sched::PodGroupLookup native = {}) {
    pod_groups_ = std::move(lookup);
    native_groups_ = std::move(native);
  }
  // Counts the GPUs a pod asks through ResourceClaims (a DRA-served node then serves them),
  // before the pod is filtered or scored. Set before serving, like setPodGroups.
  void setClaimGpus(sched::ClaimGpuLookup lookup) { claim_gpus_ = std::move(lookup); }
  // Readiness is decided by whoever owns the model (e.g. a cluster watch after its first sync).
  void setReady(bool ready) { ready_.store(ready); }
  bool ready() const { return ready_.load(); }
  size_t maxBodyBytes() const { return options_.max_body_bytes; }
  const adapters::InternalErrors& internalErrors() const { return options_.internal_errors; }

 private:
  // How a verb's call went (troupe_extender_requests_total{outcome}): decided where its answer is
  // made, never read back from the encoded body.
  enum class Outcome { kOk, kError, kBadRequest };
  static const char* outcomeLabel(Outcome outcome);
  struct VerbAnswer {
    HttpResponse response;
    Outcome outcome;
  };
  using VerbReply = std::function<void(VerbAnswer)>;
  // What route() decided: the answer, or a bind that may go ahead (it answers later).
  struct BindLater {};
  using Routed = std::variant<HttpResponse, BindLater>;

  void bindAsync(const std::string& body, std::chrono::steady_clock::time_point start, Reply reply);
  VerbAnswer filter(const std::string& body);
  VerbAnswer prioritize(const std::string& body);
  void bind(const std::string& body, VerbReply reply);
  Routed route(const std::string& method, const std::string& path, const std::string& body,
               Endpoints endpoints);
  VerbAnswer preempt(const std::string& body);
  void record(const std::string& verb, const std::string& body);

  HandlerOptions options_;
  sched::Scheduler& scheduler_;
  adapters::ExtenderMetrics& metrics_;
  adapters::Logger& logger_;
  std::atomic<bool> ready_{true};
  std::atomic<uint64_t> record_seq_{0};
  sched::PodBinder* binder_ = nullptr;
  sched::PodGroupLookup pod_groups_;  // unset: PodGroups are not read (no Kubernetes API)
  sched::ClaimGpuLookup claim_gpus_;  // unset: ResourceClaims are not read
  // The pod's claim_gpus from claim_gpus_, for a pod that names ResourceClaims.
  void fillClaimGpus(sched::PodFacts& pod) const;
  sched::PodGroupLookup native_groups_;
};

// What a listener bounds, per connection and in all. Every limit answers with a status and a
// message that names it (docs/security.md, Limits), or closes a connection that is too slow.
struct ServerLimits {
  size_t max_header_bytes = 64 << 10;  // request line + headers; more is 431
  // Request bodies being read or handled at once, all connections together; a request that
  // would pass it gets 503 (kube-scheduler retries). At least maxBodyBytes.
  size_t max_body_bytes_in_flight = 128 << 20;
  // Open connections. At the cap, each new one closes one that has not earned its slot (never
  // completed a request, else idle longest: ConnectionTable); only when every connection is
  // mid-request is the new one closed instead.
  size_t max_connections = 1024;
  // A new connection must send a whole header this soon after it opens (or after its first
  // byte, on a kept-alive connection); slow-header clients (slowloris) are closed.
  std::chrono::milliseconds header_timeout{std::chrono::seconds(10)};
  // The whole request, header and body, from its first byte.
  std::chrono::milliseconds read_timeout{std::chrono::seconds(60)};
  // A kept-alive connection with no request; longer than Go's 90 s idle-connection timeout, so
  // kube-scheduler (not Troupe) closes idle connections and never races a closing one.
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(120)};
  // Writing one answer (the client must read it).
  std::chrono::milliseconds write_timeout{std::chrono::seconds(60)};
};

// HTTPS: PEM files. With a client CA, clients must present a certificate it signed.
struct TlsFiles {
  std::string cert;
  std::string key;
  std::string client_ca;  // empty: no client certificate asked for
};

struct ServerOptions {
  Endpoints endpoints = Endpoints::kAll;
  std::string flag = "--listen";  // the flag that sets this address, for error messages
  ServerLimits limits;
  std::optional<TlsFiles> tls;        // HTTPS when set; files are re-read when they change
  adapters::ConnectionEvents events;  // connections closed by the server, failed accepts
  int io_threads = 2;                 // sockets, parsing of HTTP, /healthz and /readyz
  int worker_threads = 4;             // the verbs and /metrics
  // stop() waits this long for requests in flight to be answered (a gang bind parked at its
  // barrier, a bind writing to the API server), then answers the rest itself with an error.
  std::chrono::milliseconds drain_grace{std::chrono::seconds(5)};
  // Then it waits up to this long for handler code still running to return.
  std::chrono::milliseconds drain_running_limit{std::chrono::seconds(10)};
};

class ExtenderServer {
 public:
  ExtenderServer(std::string host, int port, ExtenderHandler& handler, adapters::Logger& logger,
                 ServerOptions options = {});
  ~ExtenderServer();
  ExtenderServer(const ExtenderServer&) = delete;
  ExtenderServer& operator=(const ExtenderServer&) = delete;

  // Starts listening; fails with a message naming the address when the port is taken.
  Status start();
  // Stops admitting requests (new ones get 503), drains those in flight (see ServerOptions),
  // then closes the listener. Afterwards no handler code of this server runs, so the handler
  // and the scheduler may be destroyed. Idempotent.
  void stop();
  // Requests admitted and not answered yet.
  int inFlight() const;
  // Open connections (those being closed included).
  size_t connections() const;
  // The connections that hold a slot, by what they have done (ConnectionTable's phases).
  struct ConnectionCounts {
    size_t fresh = 0;    // no byte of a request yet
    size_t started = 0;  // a first request's header begun
    size_t idle = 0;     // kept alive between requests
    size_t busy = 0;     // a request being read, handled or answered
  };
  ConnectionCounts connectionCounts() const;
  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits "HOST:PORT" ("[::1]:8888" for IPv6); errors name `flag` and the value.
Result<std::pair<std::string, int>> parseListenAddress(const std::string& text,
                                                       const std::string& flag = "--listen");

}  // namespace troupe::http
