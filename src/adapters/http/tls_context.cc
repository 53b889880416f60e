#include "adapters/http/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <vector>

namespace troupe::http {
namespace {

namespace ssl = boost::asio::ssl;

// OpenSSL's own reason for the last failure, e.g. "key values mismatch".
std::string lastOpenSslError() {
  unsigned long code = 0;
  unsigned long last = 0;
  while ((code = ERR_get_error()) != 0) last = code;
  if (last == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(last, text, sizeof text);
  return text;
}

}  // namespace

Result<std::shared_ptr<ssl::context>> makeServerTlsContext(const TlsFiles& files) {
  if (files.cert.empty() || files.key.empty()) {
    return invalidArgument("HTTPS needs both --tls-cert and --tls-key");
  }
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  SSL_CTX* native = ctx->native_handle();
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(native, files.cert.c_str()) != 1) {
    return invalidArgument("--tls-cert " + files.cert + ": cannot load a PEM certificate chain (" +
                           lastOpenSslError() + ")");
  }
  if (SSL_CTX_use_PrivateKey_file(native, files.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return invalidArgument("--tls-key " + files.key + ": cannot load a PEM private key (" +
                           lastOpenSslError() + ")");
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    return invalidArgument("--tls-key " + files.key + " does not belong to the certificate in --tls-cert " +
                           files.cert + " (" + lastOpenSslError() + ")");
  }
  if (!files.client_ca.empty()) {
    if (SSL_CTX_load_verify_locations(native, files.client_ca.c_str(), nullptr) != 1) {
      return invalidArgument("--client-ca " + files.client_ca + ": cannot load PEM CA certificates (" +
                             lastOpenSslError() + ")");
    }
    // Tell clients which CA to pick a certificate for (kube-scheduler has one anyway).
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca.c_str())) {
      SSL_CTX_set_client_CA_list(native, names);
    }
    SSL_CTX_set_verify(native, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    // Sessions are not resumed across a client-CA change.
    static const unsigned char kSessionContext[] = "troupe-extender";
    SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);
  }
  return ctx;
}

Result<std::unique_ptr<TlsReloader>> TlsReloader::create(TlsFiles files, adapters::Logger& logger) {
  auto r = std::make_unique<TlsReloader>(std::move(files), logger);
  r->loaded_ = r->stamps();
  Result<std::shared_ptr<ssl::context>> ctx = makeServerTlsContext(r->files_);
  if (!ctx.isOk()) return ctx.status();
  r->context_ = std::move(ctx).value();
  r->next_check_ = std::chrono::steady_clock::now() + r->check_every_;
  return r;
}

std::vector<TlsReloader::Stamp> TlsReloader::stamps() const {
  std::vector<Stamp> out;
  for (const std::string* path : {&files_.cert, &files_.key, &files_.client_ca}) {
    Stamp s;
    std::error_code ec;
    if (!path->empty()) {
      s.mtime = std::filesystem::last_write_time(*path, ec);
      s.size = ec ? 0 : std::filesystem::file_size(*path, ec);
    }
    out.push_back(s);
  }
  return out;
}

std::shared_ptr<ssl::context> TlsReloader::current() {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return context_;
  next_check_ = now + check_every_;
  const std::vector<Stamp> seen = stamps();
  if (seen == loaded_ || seen == failed_) return context_;
  Result<std::shared_ptr<ssl::context>> ctx = makeServerTlsContext(files_);
  if (!ctx.isOk()) {
    failed_ = seen;
    logger_.warn("TLS files changed but do not load; still serving the previous certificate",
                 {{"error", ctx.status().message()}});
    return context_;
  }
  context_ = std::move(ctx).value();
  loaded_ = seen;
  failed_.clear();
  logger_.info("TLS files reloaded", {{"cert", files_.cert}, {"client_ca", files_.client_ca}});
  return context_;
}

}  // namespace troupe::http
