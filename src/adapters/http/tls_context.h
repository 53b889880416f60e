// The server side of HTTPS: an OpenSSL context from PEM files (certificate chain, private key
// and, for client certificates, the CA that signs them), re-read when the files change so a
// rotated certificate (a renewed Secret) takes effect without a restart.
//
// TLS 1.2 or newer. With a client CA, a client without a certificate signed by it fails the
// handshake. Connections keep the context they started with.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/http/extender_server.h"
#include "troupe/common/status.h"

namespace troupe::http {

// A context built from `files`; errors name the file and the flag that gave it.
Result<std::shared_ptr<boost::asio::ssl::context>> makeServerTlsContext(const TlsFiles& files);

class TlsReloader {
 public:
  // Fails, naming the file, when the first load fails.
  static Result<std::unique_ptr<TlsReloader>> create(TlsFiles files, adapters::Logger& logger);

  // The context for a new connection. At most once per `check_every` it looks at the files'
  // modification times and sizes; when one changed it builds a new context (kept only when
  // the new files load: a half-written file keeps the old one and is retried).
  std::shared_ptr<boost::asio::ssl::context> current();

  // For tests: how often the files are looked at (default 1 s).
  void setCheckInterval(std::chrono::milliseconds every) {
    std::lock_guard lock(mu_);
    check_every_ = every;
    next_check_ = std::chrono::steady_clock::now();
  }

  // Use create(); public for std::make_unique.
  TlsReloader(TlsFiles files, adapters::Logger& logger) : files_(std::move(files)), logger_(logger) {}

 private:
  struct Stamp {
    std::filesystem::file_time_type mtime;
    uintmax_t size = 0;
    bool operator==(const Stamp&) const = default;
  };
  std::vector<Stamp> stamps() const;

  const TlsFiles files_;
  adapters::Logger& logger_;
  std::chrono::milliseconds check_every_{std::chrono::seconds(1)};
  std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> context_;  // guarded by mu_
  std::vector<Stamp> loaded_;                           // the files' stamps when context_ was built
  std::vector<Stamp> failed_;                           // stamps whose load failed (warned once)
  std::chrono::steady_clock::time_point next_check_;
};

}  // namespace troupe::http
