#include "adapters/kube/client/kube_config.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>

namespace troupe::kube {
namespace {

namespace fs = std::filesystem;

// Kubeconfigs, certificates, keys and tokens are small; a path that names something else
// (a directory, /dev/zero, a FIFO, a huge file) is an error, not a hang or a silent "".
constexpr uintmax_t kMaxFileBytes = 16 << 20;

Result<std::string> readFile(const fs::path& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return notFound("cannot read " + what + " " + path.string() + ": no such file or not readable");
  }
  if (!fs::is_regular_file(status)) {
    return invalidArgument("cannot read " + what + " " + path.string() + ": not a regular file");
  }
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxFileBytes) {
    return invalidArgument("cannot read " + what + " " + path.string() + ": larger than " +
                           std::to_string(kMaxFileBytes >> 20) + " MiB");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return notFound("cannot read " + what + " " + path.string() + ": no such file or not readable");
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(in.gcount()));  // it may have shrunk since
  return text;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) {
    s.pop_back();
  }
  size_t start = s.find_first_not_of(" \t\r\n");
  return start == std::string::npos ? std::string() : s.substr(start);
}

std::string openSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data found";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof buf);
  return buf;
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

BioPtr memBio(const std::string& data) {
  return BioPtr(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}

// A kubeconfig's named entries: "clusters", "users", "contexts" are lists of {name, <kind>}.
struct Doc {
  std::string source;
  fs::path base_dir;

  Status error(const YAML::Node& node, const std::string& what) const {
    const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    return invalidArgument(source + (line ? ":" + std::to_string(line) : std::string()) + ": " + what);
  }

  // The `kind` mapping of the entry named `name` in list `list` ("clusters", "cluster").
  Result<YAML::Node> entry(const YAML::Node& root, const char* list, const char* kind,
                           const std::string& name) const {
    const YAML::Node items = root[list];
    if (!items || !items.IsSequence()) {
      return invalidArgument(source + ": no \"" + std::string(list) + "\" list, so " + kind + " \"" + name +
                             "\" cannot be found");
    }
    for (const YAML::Node& item : items) {
      if (!item.IsMap() || !item["name"] || item["name"].Scalar() != name) continue;
      const YAML::Node body = item[kind];
      if (!body || !body.IsMap())
        return error(item, std::string(kind) + " \"" + name + "\" has no \"" + kind + "\" mapping");
      return body;
    }
    return invalidArgument(source + ": " + kind + " \"" + name + "\" is not in \"" + list + "\"");
  }

  static std::string str(const YAML::Node& map, const char* key) {
    const YAML::Node v = map[key];
    return v && v.IsScalar() ? v.Scalar() : std::string();
  }

  fs::path resolve(const std::string& path) const {
    fs::path p(path);
    return p.is_absolute() ? p : base_dir / p;
  }

  // "<key>-data" (base64) wins over "<key>" (a file).
  Result<std::string> dataOrFile(const YAML::Node& map, const std::string& key,
                                 const std::string& what) const {
    const std::string data = str(map, (key + "-data").c_str());
    if (!data.empty()) {
      Result<std::string> decoded = decodeBase64(data);
      if (!decoded.isOk()) {
        return error(map[key + "-data"],
                     key + "-data of " + what + " is not valid base64: " + decoded.status().message());
      }
      return decoded;
    }
    const std::string file = str(map, key.c_str());
    if (file.empty()) return std::string();
    Result<std::string> text = readFile(resolve(file), key + " of " + what);
    if (!text.isOk()) return invalidArgument(source + ": " + text.status().message());
    return text;
  }
};

Result<ClusterEndpoint> parseDoc(const YAML::Node& root, const Doc& doc, const std::string& wanted_context) {
  if (!root || !root.IsMap())
    return invalidArgument(doc.source + ": not a kubeconfig (expected a YAML mapping)");
  std::string context_name = wanted_context;
  if (context_name.empty()) context_name = Doc::str(root, "current-context");
  if (context_name.empty()) {
    return invalidArgument(doc.source +
                           ": no current-context is set; set one (kubectl config use-context) "
                           "or pass --kube-context");
  }
  Result<YAML::Node> context = doc.entry(root, "contexts", "context", context_name);
  if (!context.isOk()) return context.status();
  const std::string cluster_name = Doc::str(context.value(), "cluster");
  const std::string user_name = Doc::str(context.value(), "user");
  if (cluster_name.empty())
    return doc.error(context.value(), "context \"" + context_name + "\" names no cluster");

  ClusterEndpoint ep;
  ep.source = "kubeconfig " + doc.source + " (context " + context_name + ")";
  if (std::string ns = Doc::str(context.value(), "namespace"); !ns.empty()) ep.ns = ns;

  Result<YAML::Node> cluster = doc.entry(root, "clusters", "cluster", cluster_name);
  if (!cluster.isOk()) return cluster.status();
  const YAML::Node& c = cluster.value();
  ep.server = Doc::str(c, "server");
  if (ep.server.empty()) return doc.error(c, "cluster \"" + cluster_name + "\" has no server");
  if (ep.server.rfind("https://", 0) != 0 && ep.server.rfind("http://", 0) != 0) {
    return doc.error(c["server"], "cluster \"" + cluster_name + "\": server \"" + ep.server +
                                      "\" must start with https:// (or http://)");
  }
  while (ep.server.size() > 8 && ep.server.back() == '/') ep.server.pop_back();
  if (const YAML::Node insecure = c["insecure-skip-tls-verify"]; insecure) {
    if (!insecure.IsScalar() || (insecure.Scalar() != "true" && insecure.Scalar() != "false")) {
      return doc.error(insecure,
                       "cluster \"" + cluster_name + "\": insecure-skip-tls-verify must be true or false");
    }
    ep.insecure_skip_verify = insecure.Scalar() == "true";
  }
  ep.tls_server_name = Doc::str(c, "tls-server-name");
  if (!Doc::str(c, "proxy-url").empty()) {
    return doc.error(c["proxy-url"],
                     "cluster \"" + cluster_name + "\": proxy-url is not supported by Troupe");
  }
  Result<std::string> ca = doc.dataOrFile(c, "certificate-authority", "cluster \"" + cluster_name + "\"");
  if (!ca.isOk()) return ca.status();
  ep.ca_pem = ca.value();
  if (!ep.ca_pem.empty()) {
    if (ep.insecure_skip_verify) {
      return doc.error(c, "cluster \"" + cluster_name +
                              "\" sets both a certificate authority and "
                              "insecure-skip-tls-verify: true; remove one (as kubectl requires)");
    }
    if (Status s = checkCertificates(
            ep.ca_pem, "certificate authority of cluster \"" + cluster_name + "\" in " + doc.source);
        !s.isOk()) {
      return s;
    }
  }

  if (!user_name.empty()) {
    Result<YAML::Node> user = doc.entry(root, "users", "user", user_name);
    if (!user.isOk()) return user.status();
    const YAML::Node& u = user.value();
    const std::string what = "user \"" + user_name + "\"";
    if (u["exec"])
      return doc.error(u["exec"], what +
                                      " uses an exec credential plugin, which Troupe does not run; "
                                      "use a token, tokenFile or client certificate");
    if (u["auth-provider"]) {
      return doc.error(u["auth-provider"],
                       what +
                           " uses an auth-provider plugin, which Troupe does not support; "
                           "use a token, tokenFile or client certificate");
    }
    Result<std::string> cert = doc.dataOrFile(u, "client-certificate", what);
    if (!cert.isOk()) return cert.status();
    Result<std::string> key = doc.dataOrFile(u, "client-key", what);
    if (!key.isOk()) return key.status();
    if (cert.value().empty() != key.value().empty()) {
      return doc.error(u, what + " has a client certificate without a key or a key without a certificate");
    }
    if (!cert.value().empty()) {
      if (Status s =
              checkKeyPair(cert.value(), key.value(), "client certificate of " + what + " in " + doc.source);
          !s.isOk()) {
        return s;
      }
      ep.client_cert_pem = cert.value();
      ep.client_key_pem = key.value();
    }
    if (std::string token = Doc::str(u, "token"); !token.empty()) {
      ep.token = std::make_shared<StaticToken>(token);
    } else if (std::string file = Doc::str(u, "tokenFile"); !file.empty()) {
      auto source = std::make_shared<FileToken>(doc.resolve(file));
      if (Status s = source->load(); !s.isOk())
        return invalidArgument(doc.source + ": " + what + ": " + s.message());
      ep.token = source;
    }
    const std::string username = Doc::str(u, "username");
    if (!username.empty()) ep.basic_auth = username + ":" + Doc::str(u, "password");
  }
  return ep;
}

}  // namespace

Result<std::vector<std::string>> checkEndpointSecurity(const ClusterEndpoint& endpoint, bool allow_http) {
  std::vector<std::string> warnings;
  const bool credentials = endpoint.token || !endpoint.basic_auth.empty();
  if (endpoint.server.rfind("http://", 0) == 0) {
    const std::string what =
        "the API server " + endpoint.server + " (" + endpoint.source + ") is plain http://: " +
        (credentials ? "Troupe's token or password and every pod it reads would cross the "
                       "network unencrypted"
                     : "every pod and node Troupe reads, and every Binding it writes, would "
                       "cross the network unencrypted and unauthenticated");
    if (!allow_http) {
      return invalidArgument(what +
                             "; use the https:// address, or pass --allow-insecure-api-server if this is "
                             "deliberate (e.g. kubectl proxy on 127.0.0.1)");
    }
    warnings.push_back(what + " (allowed by --allow-insecure-api-server)");
  }
  if (endpoint.insecure_skip_verify) {
    warnings.push_back("insecure-skip-tls-verify is set for " + endpoint.server + " (" + endpoint.source +
                       "): the API server's certificate is not checked, so anyone on the network path can "
                       "pose as it and read Troupe's credentials; set certificate-authority instead");
  }
  return warnings;
}

FileToken::FileToken(std::filesystem::path path, std::chrono::seconds max_age)
    : path_(std::move(path)), max_age_(max_age) {}

Status FileToken::load() {
  std::lock_guard lock(mu_);
  std::error_code ec;
  auto mtime = fs::last_write_time(path_, ec);
  auto size = fs::file_size(path_, ec);
  Result<std::string> text = readFile(path_, "token file");
  if (!text.isOk()) return text.status();
  std::string token = trimmed(text.value());
  if (token.empty()) return invalidArgument("token file " + path_.string() + " is empty");
  token_ = std::move(token);
  mtime_ = mtime;
  size_ = size;
  read_at_ = std::chrono::steady_clock::now();
  stale_ = false;
  return Status::ok();
}

std::string FileToken::token() {
  {
    std::lock_guard lock(mu_);
    std::error_code ec1, ec2;
    const auto mtime = fs::last_write_time(path_, ec1);
    const auto size = fs::file_size(path_, ec2);
    const bool changed = !ec1 && !ec2 && (mtime != mtime_ || size != size_);
    const bool old = std::chrono::steady_clock::now() - read_at_ > max_age_;
    if (!stale_ && !changed && !old) return token_;
  }
  // Keep the last good token when the file is briefly missing during a rotation.
  (void)load();
  std::lock_guard lock(mu_);
  return token_;
}

void FileToken::invalidate() {
  std::lock_guard lock(mu_);
  stale_ = true;
}

std::string encodeBase64(const std::string& bytes) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 0x3f]);
  while (out.size() % 4) out.push_back('=');
  return out;
}

Result<std::string> decodeBase64(const std::string& text) {
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  bool padding = false;
  for (char ch : text) {
    if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') continue;
    if (ch == '=') {
      padding = true;
      continue;
    }
    if (padding) return invalidArgument("data after '=' padding");
    int v;
    if (ch >= 'A' && ch <= 'Z') {
      v = ch - 'A';
    } else if (ch >= 'a' && ch <= 'z') {
      v = ch - 'a' + 26;
    } else if (ch >= '0' && ch <= '9') {
      v = ch - '0' + 52;
    } else if (ch == '+') {
      v = 62;
    } else if (ch == '/') {
      v = 63;
    } else {
      return invalidArgument(std::string("unexpected character '") + ch + "'");
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (bits >= 6) return invalidArgument("truncated data");
  return out;
}

Status checkCertificates(const std::string& pem, const std::string& what) {
  BioPtr bio = memBio(pem);
  if (!bio) return internalError("out of memory reading " + what);
  int count = 0;
  ERR_clear_error();
  while (X509Ptr cert = X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr))) ++count;
  ERR_clear_error();  // the end of the data reads as an error
  if (count == 0)
    return invalidArgument(what + " holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")");
  return Status::ok();
}

Status checkKeyPair(const std::string& cert_pem, const std::string& key_pem, const std::string& what) {
  ERR_clear_error();
  BioPtr cbio = memBio(cert_pem);
  X509Ptr cert(cbio ? PEM_read_bio_X509(cbio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) return invalidArgument(what + ": the certificate is not PEM: " + openSslError());
  BioPtr kbio = memBio(key_pem);
  KeyPtr key(kbio ? PEM_read_bio_PrivateKey(kbio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key)
    return invalidArgument(what + ": the key is not an unencrypted PEM private key: " + openSslError());
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return invalidArgument(what + ": the key does not belong to the certificate");
  }
  return Status::ok();
}

Result<ClusterEndpoint> parseKubeconfig(const std::string& text, const std::string& source_name,
                                        const std::filesystem::path& base_dir, const std::string& context) {
  Doc doc{source_name, base_dir};
  try {
    YAML::Node root = YAML::Load(text);
    return parseDoc(root, doc, context);
  } catch (const YAML::ParserException& e) {
    return invalidArgument(source_name + ":" + std::to_string(e.mark.line + 1) +
                           ": not valid YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    return invalidArgument(source_name + ": unexpected structure: " + e.what());
  } catch (const std::exception& e) {
    // Nothing else is expected (std::bad_alloc on a pathological file): still an error, not a crash.
    return invalidArgument(source_name + ": cannot be read as a kubeconfig: " + e.what());
  }
}

Result<ClusterEndpoint> loadKubeconfig(const std::string& path, const std::string& context) {
  Result<std::string> text = readFile(path, "kubeconfig");
  if (!text.isOk()) return text.status();
  fs::path base = fs::path(path).parent_path();
  if (base.empty()) base = ".";
  return parseKubeconfig(text.value(), path, base, context);
}

std::optional<InClusterEnv> detectInCluster() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  if (!host || !*host) return std::nullopt;
  InClusterEnv env;
  env.host = host;
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  env.port = port && *port ? port : "443";
  if (const char* dir = std::getenv("TROUPE_SERVICEACCOUNT_DIR"); dir && *dir) env.service_account_dir = dir;
  return env;
}

Result<ClusterEndpoint> inClusterEndpoint(const InClusterEnv& env) {
  if (env.host.empty()) return invalidArgument("in-cluster: KUBERNETES_SERVICE_HOST is empty");
  ClusterEndpoint ep;
  const bool ipv6 = env.host.find(':') != std::string::npos;
  ep.server = "https://" + (ipv6 ? "[" + env.host + "]" : env.host) + ":" + env.port;
  const fs::path dir = env.service_account_dir;
  auto token = std::make_shared<FileToken>(dir / "token");
  if (Status s = token->load(); !s.isOk()) {
    return invalidArgument(
        "in-cluster: " + s.message() +
        " (is a service account token mounted? automountServiceAccountToken must not be false)");
  }
  ep.token = token;
  Result<std::string> ca = readFile(dir / "ca.crt", "service account CA");
  if (!ca.isOk()) return invalidArgument("in-cluster: " + ca.status().message());
  if (Status s = checkCertificates(ca.value(), "in-cluster CA " + (dir / "ca.crt").string()); !s.isOk())
    return s;
  ep.ca_pem = ca.value();
  if (Result<std::string> ns = readFile(dir / "namespace", "namespace");
      ns.isOk() && !trimmed(ns.value()).empty()) {
    ep.ns = trimmed(ns.value());
  }
  ep.source = "in-cluster service account (" + dir.string() + ", " + ep.server + ")";
  return ep;
}

}  // namespace troupe::kube
