// A watch over the real ApiClient (cpprestsdk) against a loopback server whose watch streams
// send one event and then stay open and silent: relistNow() from another thread must close
// the connection and list again, and stop() must end the next silent stream the same way.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "adapters/common/logger.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/watch/watcher.h"
#include "support/wait.h"

namespace {

using troupe::testing::waitFor;

using Clock = std::chrono::steady_clock;
using troupe::kube::Json;
using troupe::kube::WatchEventType;

// Answers lists with an empty PodList, and watches with one ADDED event, then silence until
// the client closes the connection.
class SilentApiServer {
 public:
  SilentApiServer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ::listen(listen_fd_, 16);
    acceptor_ = std::thread([this] { acceptLoop(); });
  }
  ~SilentApiServer() {
    done_ = true;
    acceptor_.join();
    for (std::thread& t : connections_) t.join();
    ::close(listen_fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int lists() const { return lists_.load(); }
  int watches() const { return watches_.load(); }
  int watchesClosedByClient() const { return closed_by_client_.load(); }

 private:
  void acceptLoop() {
    while (!done_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd >= 0) connections_.emplace_back([this, fd] { serve(fd); });
    }
  }
  void serve(int fd) {
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        ::close(fd);
        return;
      }
      request.append(buf, static_cast<size_t>(n));
    }
    const std::string line = request.substr(0, request.find("\r\n"));
    if (line.find("watch=true") == std::string::npos) {
      const int n = ++lists_;
      const std::string body = nlohmann::json{
          {"kind", "PodList"},
          {"metadata", {{"resourceVersion", std::to_string(100 * n)}}},
          {"items", {}}}.dump();
      send(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body);
      ::close(fd);
      return;
    }
    const int n = ++watches_;
    const std::string event =
        nlohmann::json{
            {"type", "ADDED"},
            {"object", {{"metadata", {{"name", "w" + std::to_string(n)}, {"resourceVersion", "1"}}}}}}
            .dump() +
        "\n";
    std::ostringstream chunk;
    chunk << std::hex << event.size() << "\r\n" << event << "\r\n";
    send(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
                 chunk.str());
    // Half-dead from here: the connection stays open and nothing more is sent.
    while (!done_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      if (::recv(fd, buf, sizeof buf, 0) <= 0) {
        ++closed_by_client_;
        break;
      }
    }
    ::close(fd);
  }
  static void send(int fd, const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> done_{false};
  std::atomic<int> lists_{0}, watches_{0}, closed_by_client_{0};
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // only the acceptor thread adds, before the join
};

struct Events final : troupe::kube::WatchHandler {
  std::mutex mu;
  std::vector<std::string> names;
  void beginList() override {}
  void listed(const Json&) override {}
  void endList() override {}
  void event(WatchEventType, const Json& o) override {
    std::lock_guard lock(mu);
    names.push_back(o["metadata"]["name"].get<std::string>());
  }
  size_t count() {
    std::lock_guard lock(mu);
    return names.size();
  }
};

}  // namespace

TEST_CASE("kube watch over ApiClient: a silent stream is ended from another thread, then by stop",
          "[kube][watch][liveness]") {
  SilentApiServer server;
  troupe::kube::ClusterEndpoint endpoint;
  endpoint.server = server.url();
  endpoint.source = "test";
  auto api = troupe::kube::ApiClient::create(endpoint);
  REQUIRE(api.isOk());
  Events handler;
  std::ostringstream out;
  troupe::adapters::Logger logger{out, troupe::adapters::LogLevel::kDebug};
  troupe::kube::WatchConfig config;
  config.name = "pods";
  config.path = "/api/v1/pods";
  troupe::kube::Watcher watcher(*api.value(), config, handler, logger, [] { return 0.0; });
  troupe::kube::StopSignal stop;
  std::thread runner([&] { watcher.run(stop); });

  // The first watch delivered its event and went silent.
  const bool first = waitFor([&] { return handler.count() == 1 && watcher.watchingSince().has_value(); });
  const auto t0 = Clock::now();
  watcher.relistNow("stale");
  const bool relisted = waitFor([&] { return server.watchesClosedByClient() == 1 && server.lists() == 2; });
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const bool second = waitFor([&] { return handler.count() == 2 && watcher.watchingSince().has_value(); });
  const auto t1 = Clock::now();
  stop.stop();
  runner.join();
  const double stop_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  INFO(out.str());
  REQUIRE(first);
  CHECK(relisted);
  CHECK(seconds < 2.0);
  CHECK(second);
  CHECK(stop_seconds < 2.0);
  CHECK(server.watches() == 2);
  CHECK(watcher.stats().requested == 1);
  CHECK(watcher.resourceVersion() == "1");  // the second watch's event
  CHECK(waitFor([&] { return server.watchesClosedByClient() == 2; }));
}
