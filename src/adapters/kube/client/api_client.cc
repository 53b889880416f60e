#include "adapters/kube/client/api_client.h"

#include <cpprest/http_client.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <boost/asio/ssl.hpp>
#include <cctype>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <system_error>

namespace troupe::kube {
namespace {

namespace http = web::http;
namespace client = web::http::client;

// Installs the endpoint's CA (as the only trust anchors), client certificate and key.
void configureTls(const ClusterEndpoint& ep, boost::asio::ssl::context& ctx) {
  ctx.set_options(boost::asio::ssl::context::no_sslv2 | boost::asio::ssl::context::no_sslv3 |
                  boost::asio::ssl::context::no_tlsv1 | boost::asio::ssl::context::no_tlsv1_1);
  if (!ep.ca_pem.empty()) {
    X509_STORE* store = X509_STORE_new();
    BIO* bio = BIO_new_mem_buf(ep.ca_pem.data(), static_cast<int>(ep.ca_pem.size()));
    while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store, cert);
      X509_free(cert);
    }
    BIO_free(bio);
    ERR_clear_error();
    SSL_CTX_set_cert_store(ctx.native_handle(), store);  // the context owns it now
  }
  if (!ep.client_cert_pem.empty()) {
    ctx.use_certificate_chain(boost::asio::buffer(ep.client_cert_pem));
    ctx.use_private_key(boost::asio::buffer(ep.client_key_pem), boost::asio::ssl::context::pem);
  }
}

// What a failed request without a response means: was anything sent?
ApiReply classifyException(const std::exception& e, const std::string& server) {
  std::string what = e.what();
  int code = 0;
  if (const auto* he = dynamic_cast<const http::http_exception*>(&e)) code = he->error_code().value();
  const bool before_sending = code == ECONNREFUSED || code == EHOSTUNREACH || code == ENETUNREACH ||
                              what.find("Failed to connect") != std::string::npos ||
                              what.find("resolve") != std::string::npos ||
                              what.find("SSL handshake") != std::string::npos;
  std::string message = "cannot reach the API server at " + server + ": " + what;
  if (what.find("SSL handshake") != std::string::npos) {
    message += " (TLS: check the certificate authority and tls-server-name)";
  }
  return replyFromFailure(before_sending ? ApiErrorKind::kUnreachable : ApiErrorKind::kTransport, message);
}

}  // namespace

const char* apiErrorName(ApiErrorKind kind) {
  switch (kind) {
    case ApiErrorKind::kNone: return "ok";
    case ApiErrorKind::kNotFound: return "NotFound";
    case ApiErrorKind::kConflict: return "Conflict";
    case ApiErrorKind::kGone: return "Gone";
    case ApiErrorKind::kUnauthorized: return "Unauthorized";
    case ApiErrorKind::kForbidden: return "Forbidden";
    case ApiErrorKind::kInvalid: return "Invalid";
    case ApiErrorKind::kThrottled: return "TooManyRequests";
    case ApiErrorKind::kServer: return "ServerError";
    case ApiErrorKind::kUnreachable: return "Unreachable";
    case ApiErrorKind::kTransport: return "ConnectionLost";
    case ApiErrorKind::kCancelled: return "Cancelled";
    case ApiErrorKind::kOther: return "Error";
  }
  return "Error";
}

ApiReply replyFromHttp(int status, std::string body) {
  ApiReply r;
  r.status = status;
  r.body = std::move(body);
  if (r.ok()) {
    r.kind = ApiErrorKind::kNone;
    return r;
  }
  switch (status) {
    case 400:
    case 422: r.kind = ApiErrorKind::kInvalid; break;
    case 401: r.kind = ApiErrorKind::kUnauthorized; break;
    case 403: r.kind = ApiErrorKind::kForbidden; break;
    case 404: r.kind = ApiErrorKind::kNotFound; break;
    case 409: r.kind = ApiErrorKind::kConflict; break;
    case 410: r.kind = ApiErrorKind::kGone; break;
    case 429: r.kind = ApiErrorKind::kThrottled; break;
    default: r.kind = status >= 500 ? ApiErrorKind::kServer : ApiErrorKind::kOther; break;
  }
  // A v1.Status body says what went wrong ("pods \"x\" not found").
  nlohmann::json doc = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object() && doc.contains("message") && doc["message"].is_string()) {
    r.message = doc["message"].get<std::string>();
  } else {
    r.message = r.body.substr(0, 200);
  }
  r.message = "HTTP " + std::to_string(status) + " " + apiErrorName(r.kind) +
              (r.message.empty() ? "" : ": " + r.message);
  return r;
}

ApiReply replyFromFailure(ApiErrorKind kind, std::string message) {
  ApiReply r;
  r.kind = kind;
  r.message = std::move(message);
  return r;
}

Status toStatus(const ApiReply& reply, const std::string& what) {
  if (reply.ok()) return Status::ok();
  std::string m = "cannot " + what + ": " + reply.message;
  switch (reply.kind) {
    case ApiErrorKind::kNotFound: return notFound(std::move(m));
    case ApiErrorKind::kConflict:
    case ApiErrorKind::kGone: return failedPrecondition(std::move(m));
    case ApiErrorKind::kInvalid: return invalidArgument(std::move(m));
    case ApiErrorKind::kForbidden:
      return failedPrecondition(m +
                                " (Troupe's service account lacks an RBAC permission; see deploy/rbac.yaml)");
    case ApiErrorKind::kUnauthorized:
      return failedPrecondition(m + " (check the token or client certificate)");
    default: return unavailable(std::move(m));
  }
}

std::string urlEncode(const std::string& value) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

struct ApiClient::Impl {
  std::shared_ptr<const ClusterEndpoint> endpoint;
  ApiClientOptions options;
  client::http_client_config config;
  std::unique_ptr<client::http_client> client;

  http::http_request makeRequest(const std::string& method, const std::string& path) const {
    http::http_request req(method);
    req.set_request_uri(utility::conversions::to_string_t(path));
    req.headers().add("Accept", "application/json");
    req.headers().add("User-Agent", options.user_agent);
    if (!endpoint->tls_server_name.empty()) req.headers().add("Host", endpoint->tls_server_name);
    if (endpoint->token) {
      req.headers().add("Authorization", "Bearer " + endpoint->token->token());
    } else if (!endpoint->basic_auth.empty()) {
      req.headers().add("Authorization", "Basic " + encodeBase64(endpoint->basic_auth));
    }
    return req;
  }
};

ApiClient::ApiClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ApiClient::~ApiClient() = default;

const ClusterEndpoint& ApiClient::endpoint() const { return *impl_->endpoint; }

Result<std::unique_ptr<ApiClient>> ApiClient::create(ClusterEndpoint endpoint, ApiClientOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->endpoint = std::make_shared<const ClusterEndpoint>(std::move(endpoint));
  impl->options = std::move(options);
  impl->config.set_timeout(impl->options.request_timeout);
  impl->config.set_validate_certificates(!impl->endpoint->insecure_skip_verify);
  std::shared_ptr<const ClusterEndpoint> ep = impl->endpoint;
  impl->config.set_ssl_context_callback([ep](boost::asio::ssl::context& ctx) { configureTls(*ep, ctx); });
  try {
    impl->client =
        std::make_unique<client::http_client>(utility::conversions::to_string_t(ep->server), impl->config);
  } catch (const std::exception& e) {
    return invalidArgument("API server URL \"" + ep->server + "\" (" + ep->source +
                           ") is not usable: " + e.what());
  }
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(impl)));
}

ApiReply ApiClient::request(const std::string& method, const std::string& path, const std::string& body,
                            const std::string& content_type) {
  for (int attempt = 0;; ++attempt) {
    try {
      http::http_request req = impl_->makeRequest(method, path);
      if (!body.empty() || method == "POST" || method == "PATCH" || method == "PUT") {
        req.set_body(body, content_type);
      }
      http::http_response resp = impl_->client->request(req).get();
      ApiReply reply = replyFromHttp(resp.status_code(), resp.extract_utf8string(true).get());
      if (reply.kind == ApiErrorKind::kUnauthorized && attempt == 0 && impl_->endpoint->token) {
        impl_->endpoint->token->invalidate();  // a rotated token: read it again and retry once
        continue;
      }
      return reply;
    } catch (const std::exception& e) {
      return classifyException(e, impl_->endpoint->server);
    }
  }
}

ApiReply ApiClient::stream(const std::string& path, std::chrono::seconds idle_timeout,
                           const std::function<bool(std::string&)>& on_line, StopSignal& stop) {
  if (stop.stopped()) return replyFromFailure(ApiErrorKind::kCancelled, "stopped");
  pplx::cancellation_token_source cts;
  const uint64_t subscription = stop.subscribe([cts]() mutable { cts.cancel(); });
  // On every way out: stop listening for stop(), and abort the request, so a stream left
  // early (an ERROR event, a bad line) does not keep downloading into a buffer nobody reads.
  struct Cleanup {
    StopSignal& stop;
    uint64_t id;
    pplx::cancellation_token_source cts;
    ~Cleanup() {
      stop.unsubscribe(id);
      cts.cancel();
    }
  } cleanup{stop, subscription, cts};
  try {
    // Its own client: a watch holds its connection for minutes, and its idle timeout differs.
    client::http_client_config config = impl_->config;
    config.set_timeout(idle_timeout);
    client::http_client watch_client(utility::conversions::to_string_t(impl_->endpoint->server), config);
    http::http_response resp = watch_client.request(impl_->makeRequest("GET", path), cts.get_token()).get();
    if (resp.status_code() != http::status_codes::OK) {
      ApiReply reply = replyFromHttp(resp.status_code(), resp.extract_utf8string(true).get());
      if (reply.kind == ApiErrorKind::kUnauthorized && impl_->endpoint->token)
        impl_->endpoint->token->invalidate();
      return reply;
    }
    auto buf = resp.body().streambuf();
    std::string pending;
    std::vector<uint8_t> chunk(64 * 1024);
    for (;;) {
      if (stop.stopped()) return replyFromFailure(ApiErrorKind::kCancelled, "stopped");
      const size_t avail = buf.in_avail();
      if (avail == 0) {
        // Nothing buffered: wait for one byte (or the end), then take whatever follows.
        const auto c = buf.bumpc().get();
        if (c == decltype(buf)::traits::eof()) break;
        pending.push_back(static_cast<char>(c));
      } else {
        const size_t n = buf.getn(chunk.data(), std::min(avail, chunk.size())).get();
        pending.append(reinterpret_cast<const char*>(chunk.data()), n);
      }
      size_t start = 0;
      for (size_t nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n', start)) {
        std::string line = pending.substr(start, nl - start);
        start = nl + 1;
        if (line.empty()) continue;
        if (!on_line(line)) return replyFromHttp(200, "");
      }
      pending.erase(0, start);
    }
    if (!pending.empty()) on_line(pending);
    return replyFromHttp(200, "");
  } catch (const std::exception& e) {
    if (stop.stopped()) return replyFromFailure(ApiErrorKind::kCancelled, "stopped");
    return classifyException(e, impl_->endpoint->server);
  }
}

}  // namespace troupe::kube
