// HTTPS with client certificates (serve --tls-cert --tls-key --client-ca) over real TLS: a CA,
// a server certificate for 127.0.0.1 and client certificates are made with OpenSSL in a temp
// directory; a Beast client connects with and without a certificate.
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <thread>

#include "adapters/http/extender_server.h"
#include "adapters/http/tls_context.h"
#include "adapters/metrics/metrics.h"
#include "support/fixtures.h"

using troupe::testing::freeLoopbackPort;
using troupe::testing::gpuNode;

namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

Key newKey() { return Key(EVP_EC_gen("P-256")); }

void addExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  REQUIRE(ext != nullptr);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A certificate for `key` named `cn`, signed by issuer (self-signed when issuer is null).
Cert newCert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key, bool ca,
             const char* usage, long serial) {
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name);
  X509* signer = issuer ? issuer : cert.get();
  addExtension(cert.get(), signer, NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  addExtension(cert.get(), signer, NID_key_usage,
               ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
  if (usage) addExtension(cert.get(), signer, NID_ext_key_usage, usage);
  if (!ca && std::string(usage ? usage : "") == "serverAuth") {
    addExtension(cert.get(), signer, NID_subject_alt_name, "IP:127.0.0.1");
  }
  REQUIRE(X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()) > 0);
  return cert;
}

void writePem(const std::string& path, X509* cert) {
  FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f);
  PEM_write_X509(f, cert);
  std::fclose(f);
}
void writePem(const std::string& path, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f);
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
}

// A CA with a server certificate and a client certificate, and a second CA ("other") whose
// client certificate the server must refuse.
struct Pki {
  std::filesystem::path dir;
  Key ca_key = newKey(), other_key = newKey();
  Cert ca = newCert(ca_key.get(), "troupe-test-ca", nullptr, nullptr, true, nullptr, 1);
  Cert other = newCert(other_key.get(), "some-other-ca", nullptr, nullptr, true, nullptr, 2);

  Pki() {
    dir = std::filesystem::temp_directory_path() /
          ("troupe-tls-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    std::filesystem::create_directories(dir);
    writePem(path("ca.crt"), ca.get());
    issueServer("server", "troupe-extender", 10);
    issueClient("client", ca.get(), ca_key.get(), 11);
    issueClient("stranger", other.get(), other_key.get(), 12);
  }
  ~Pki() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  void issueServer(const std::string& name, const std::string& cn, long serial) {
    Key key = newKey();
    Cert cert = newCert(key.get(), cn, ca.get(), ca_key.get(), false, "serverAuth", serial);
    writePem(path(name + ".key"), key.get());
    writePem(path(name + ".crt"), cert.get());
  }
  void issueClient(const std::string& name, X509* issuer, EVP_PKEY* issuer_key, long serial) {
    Key key = newKey();
    Cert cert = newCert(key.get(), "kube-scheduler", issuer, issuer_key, false, "clientAuth", serial);
    writePem(path(name + ".key"), key.get());
    writePem(path(name + ".crt"), cert.get());
  }
  troupe::http::TlsFiles files(bool client_ca = true) const {
    return {path("server.crt"), path("server.key"), client_ca ? path("ca.crt") : ""};
  }
};

struct Answer {
  int status = 0;  // 0: no HTTP answer (the handshake failed or the connection was closed)
  std::string body;
  std::string error;
  std::string server_cn;  // the subject CN of the certificate the server presented
};

// GET `path` over TLS, trusting the test CA, with the client certificate `client` ("" = none).
Answer httpsGet(const Pki& pki, int port, const std::string& path, const std::string& client) {
  Answer out;
  try {
    net::io_context ioc;
    ssl::context ctx(ssl::context::tls_client);
    ctx.load_verify_file(pki.path("ca.crt"));
    ctx.set_verify_mode(ssl::verify_peer);
    if (!client.empty()) {
      ctx.use_certificate_chain_file(pki.path(client + ".crt"));
      ctx.use_private_key_file(pki.path(client + ".key"), ssl::context::pem);
    }
    beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(10));
    beast::get_lowest_layer(stream).connect(
        net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    stream.handshake(ssl::stream_base::client);
    if (X509* peer = SSL_get1_peer_certificate(stream.native_handle())) {
      char cn[256] = {};
      X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
      out.server_cn = cn;
      X509_free(peer);
    }
    bhttp::request<bhttp::string_body> req(bhttp::verb::get, path, 11);
    req.set(bhttp::field::host, "127.0.0.1");
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(stream, buffer, res);
    out.status = static_cast<int>(res.result_int());
    out.body = res.body();
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

struct Served {
  std::ostringstream log_sink;
  troupe::adapters::Logger logger{log_sink, troupe::adapters::LogLevel::kDebug};
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  troupe::metrics::Metrics metrics{"test"};
  troupe::http::ExtenderHandler handler{troupe::http::HandlerOptions{}, scheduler, metrics, logger};
  int port = freeLoopbackPort();
  std::unique_ptr<troupe::http::ExtenderServer> server;

  explicit Served(const troupe::http::TlsFiles& files) {
    REQUIRE(scheduler.upsertNode(gpuNode("n1", 8)).isOk());
    troupe::http::ServerOptions options;
    options.tls = files;
    server = std::make_unique<troupe::http::ExtenderServer>("127.0.0.1", port, handler, logger, options);
  }
};

}  // namespace

TEST_CASE("HTTPS with a client CA: a client certificate it signed is served, others are refused",
          "[http][tls]") {
  Pki pki;
  Served s(pki.files());
  REQUIRE(s.server->start().isOk());
  CHECK(s.server->url().rfind("https://", 0) == 0);

  Answer ok = httpsGet(pki, s.port, "/healthz", "client");
  INFO(ok.error);
  CHECK(ok.status == 200);
  CHECK(ok.server_cn == "troupe-extender");
  Answer metrics = httpsGet(pki, s.port, "/metrics", "client");
  CHECK(metrics.status == 200);

  // No certificate, or one from another CA: the handshake fails, nothing reaches the handler.
  Answer none = httpsGet(pki, s.port, "/healthz", "");
  CHECK(none.status == 0);
  CHECK_FALSE(none.error.empty());
  Answer stranger = httpsGet(pki, s.port, "/healthz", "stranger");
  CHECK(stranger.status == 0);
  CHECK_FALSE(stranger.error.empty());

  // Plain HTTP on the HTTPS port gets no HTTP answer either.
  {
    net::io_context ioc;
    beast::tcp_stream plain(ioc);
    plain.expires_after(std::chrono::seconds(5));
    plain.connect(
        net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(s.port)));
    bhttp::request<bhttp::string_body> req(bhttp::verb::get, "/healthz", 11);
    req.set(bhttp::field::host, "127.0.0.1");
    bhttp::write(plain, req);
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    beast::error_code ec;
    bhttp::read(plain, buffer, res, ec);
    CHECK(ec);
  }
  // The server keeps serving good clients afterwards.
  CHECK(httpsGet(pki, s.port, "/healthz", "client").status == 200);
}

TEST_CASE("HTTPS without a client CA serves any TLS client", "[http][tls]") {
  Pki pki;
  Served s(pki.files(/*client_ca=*/false));
  REQUIRE(s.server->start().isOk());
  CHECK(httpsGet(pki, s.port, "/healthz", "").status == 200);
  CHECK(httpsGet(pki, s.port, "/healthz", "client").status == 200);
}

TEST_CASE("TLS files that do not load fail start() with a message naming the file", "[http][tls]") {
  Pki pki;
  troupe::http::TlsFiles files = pki.files();
  SECTION("a missing certificate") { files.cert = pki.path("absent.crt"); }
  SECTION("a key of another certificate") { files.key = pki.path("client.key"); }
  SECTION("a CA file that is not PEM") {
    files.client_ca = pki.path("garbage.pem");
    FILE* f = std::fopen(files.client_ca.c_str(), "w");
    std::fputs("not a certificate\n", f);
    std::fclose(f);
  }
  Served s(files);
  troupe::Status st = s.server->start();
  REQUIRE_FALSE(st.isOk());
  const bool names_a_file = st.message().find(files.cert) != std::string::npos ||
                            st.message().find(files.key) != std::string::npos ||
                            st.message().find(files.client_ca) != std::string::npos;
  INFO(st.message());
  CHECK(names_a_file);
}

TEST_CASE("a renewed certificate is served to new connections without a restart", "[http][tls]") {
  Pki pki;
  std::ostringstream sink;
  troupe::adapters::Logger logger(sink, troupe::adapters::LogLevel::kInfo);
  auto reloader = troupe::http::TlsReloader::create(pki.files(), logger);
  REQUIRE(reloader.isOk());
  std::unique_ptr<troupe::http::TlsReloader> tls = std::move(reloader).value();
  tls->setCheckInterval(std::chrono::milliseconds(0));
  auto first = tls->current();
  CHECK(tls->current() == first);  // nothing changed: the same context

  // A half-written key keeps the old context; the complete pair replaces it.
  std::filesystem::copy_file(pki.path("client.key"), pki.path("server.key"),
                             std::filesystem::copy_options::overwrite_existing);
  CHECK(tls->current() == first);
  CHECK(sink.str().find("do not load") != std::string::npos);
  pki.issueServer("server", "troupe-extender-renewed", 20);
  auto renewed = tls->current();
  CHECK(renewed != first);
  CHECK(sink.str().find("TLS files reloaded") != std::string::npos);

  // Over a real server: after the files change, a new connection sees the new certificate.
  Pki pki2;
  Served s(pki2.files());
  REQUIRE(s.server->start().isOk());
  CHECK(httpsGet(pki2, s.port, "/healthz", "client").server_cn == "troupe-extender");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a distinct modification time
  pki2.issueServer("server", "troupe-extender-renewed", 21);
  std::string seen;
  for (int i = 0; i < 40 && seen != "troupe-extender-renewed"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the server looks once a second
    seen = httpsGet(pki2, s.port, "/healthz", "client").server_cn;
  }
  CHECK(seen == "troupe-extender-renewed");
}
