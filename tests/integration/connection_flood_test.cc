// Connection floods (issue 34): thousands of connections that never send a byte, held on the
// verbs' port and on the probes' port (serve --metrics-listen) in turn, must not cost a
// kubelet probe or kube-scheduler's filter; at the cap the server closes the connections that
// least earned their slot, never one mid-request; out of file descriptors it keeps accepting
// without spinning. Raw sockets, so that a connection can be opened and left silent, or left
// mid-request. Run under ASan (build-asan) too.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "adapters/http/extender_server.h"
#include "adapters/metrics/metrics.h"
#include "support/fixtures.h"

using troupe::testing::freeLoopbackPort;
using troupe::testing::gpuNode;

namespace {

using Clock = std::chrono::steady_clock;

// One client connection to 127.0.0.1 (blocking, with a receive timeout).
class Conn {
 public:
  explicit Conn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      error_ = errno;
      return;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      error_ = errno;
      ::close(fd_);
      fd_ = -1;
      return;
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Conn() {
    if (fd_ >= 0) ::close(fd_);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  bool ok() const { return fd_ >= 0; }
  int error() const { return error_; }

  bool send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // The status of one answer (its body read by Content-Length); 0 when the connection ended
  // or timed out first.
  int readStatus() {
    for (;;) {
      const size_t end = buf_.find("\r\n\r\n");
      if (end != std::string::npos) {
        const int status = std::atoi(buf_.c_str() + buf_.find(' ') + 1);
        size_t length = 0;
        const size_t cl = buf_.find("Content-Length: ");
        if (cl != std::string::npos && cl < end) length = std::strtoul(buf_.c_str() + cl + 16, nullptr, 10);
        while (buf_.size() < end + 4 + length) {
          if (!more()) return 0;
        }
        buf_.erase(0, end + 4 + length);
        return status;
      }
      if (!more()) return 0;
    }
  }

  int exchange(const std::string& request) { return send(request) ? readStatus() : 0; }

  // Whether the server closes this connection within `within` (bytes it sends are dropped).
  bool closedByServer(std::chrono::milliseconds within) {
    const auto deadline = Clock::now() + within;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) <= 0) return false;
      char scratch[4096];
      const ssize_t n = ::recv(fd_, scratch, sizeof scratch, MSG_DONTWAIT);
      if (n <= 0) return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    }
  }

 private:
  bool more() {
    char chunk[16384];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  int error_ = 0;
  std::string buf_;
};

std::string get(const std::string& path, bool keep_alive = false) {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + (keep_alive ? "" : "Connection: close\r\n") + "\r\n";
}

const std::string kFilterBody =
    R"({"Pod":{"metadata":{"name":"p","namespace":"ml","uid":"u-p"},"spec":{"containers":[{"name":"c",)"
    R"("resources":{"limits":{"nvidia.com/gpu":"2"}}}]},"status":{}},"Nodes":null,"NodeNames":["n1","n2"]})";

std::string filterHead(size_t length, bool keep_alive = false) {
  return "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         std::string(keep_alive ? "" : "Connection: close\r\n") +
         "Content-Length: " + std::to_string(length) + "\r\n\r\n";
}

std::string filter(bool keep_alive = false) {
  return filterHead(kFilterBody.size(), keep_alive) + kFilterBody;
}

// Raises this process's soft open-file limit to `needed` (up to the hard limit); false when the
// hard limit is lower. Restores the old soft limit when it goes.
class FileLimit {
 public:
  explicit FileLimit(rlim_t needed) {
    getrlimit(RLIMIT_NOFILE, &old_);
    rlimit raised = old_;
    if (raised.rlim_cur != RLIM_INFINITY && raised.rlim_cur < needed) {
      if (raised.rlim_max != RLIM_INFINITY && raised.rlim_max < needed) return;
      raised.rlim_cur = needed;
      if (setrlimit(RLIMIT_NOFILE, &raised) != 0) return;
    }
    ok_ = true;
  }
  ~FileLimit() { setrlimit(RLIMIT_NOFILE, &old_); }
  bool ok() const { return ok_; }
  rlim_t hard() const { return old_.rlim_max; }

 private:
  rlimit old_{};
  bool ok_ = false;
};

// No file descriptor left in this process: the soft limit lowered to a little above the
// highest one open, and every number below it taken by /dev/null. release(n) frees n of them.
// Restores everything when it goes.
class Exhausted {
 public:
  Exhausted() {
    getrlimit(RLIMIT_NOFILE, &old_);
    int highest = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
      highest = std::max(highest, std::atoi(e.path().filename().c_str()));
    }
    rlimit low = old_;
    low.rlim_cur = static_cast<rlim_t>(highest) + 32;
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) return;
    for (;;) {
      const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      fillers_.push_back(fd);
    }
    ok_ = errno == EMFILE;
  }
  ~Exhausted() {
    release(fillers_.size());
    setrlimit(RLIMIT_NOFILE, &old_);
  }
  bool ok() const { return ok_; }
  void release(size_t n) {
    for (; n > 0 && !fillers_.empty(); --n) {
      ::close(fillers_.back());
      fillers_.pop_back();
    }
  }

 private:
  rlimit old_{};
  std::vector<int> fillers_;
  bool ok_ = false;
};

// What the servers report about their connections, by "port/reason".
struct Events {
  std::mutex mu;
  std::map<std::string, int> closed;
  std::atomic<int> accept_errors{0};
  troupe::adapters::ConnectionEvents on(const std::string& port) {
    return troupe::adapters::ConnectionEvents(
        [this, port](const std::string& reason) {
          std::lock_guard lock(mu);
          ++closed[port + "/" + reason];
        },
        [this] { ++accept_errors; });
  }
  int count(const std::string& key) {
    std::lock_guard lock(mu);
    return closed[key];
  }
};

struct Stack {
  std::ostringstream log_sink;
  troupe::adapters::Logger logger{log_sink, troupe::adapters::LogLevel::kInfo};
  troupe::sched::Scheduler scheduler{troupe::sched::SchedulerConfig{}};
  troupe::metrics::Metrics metrics{"test"};
  troupe::http::ExtenderHandler handler{troupe::http::HandlerOptions{}, scheduler, metrics, logger};
  Events events;

  Stack() {
    for (const char* name : {"n1", "n2"}) REQUIRE(scheduler.upsertNode(gpuNode(name, 8)).isOk());
  }
  std::unique_ptr<troupe::http::ExtenderServer> server(troupe::http::Endpoints endpoints,
                                                       size_t max_connections, const std::string& port_name) {
    troupe::http::ServerOptions options;
    options.endpoints = endpoints;
    options.limits.max_connections = max_connections;
    options.events = events.on(port_name);
    auto s = std::make_unique<troupe::http::ExtenderServer>("127.0.0.1", freeLoopbackPort(), handler, logger,
                                                            options);
    REQUIRE(s->start().isOk());
    return s;
  }
};

int portOf(const troupe::http::ExtenderServer& s) {
  return std::stoi(s.url().substr(s.url().rfind(':') + 1));
}

// Waits until `cond` holds (the server works on its own threads); false after 10 s.
template <class F>
bool eventually(F cond) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!cond()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace

TEST_CASE("3,000 idle connections on either port cost no probe and no filter", "[http][flood]") {
  constexpr int kFlood = 3000;
  constexpr size_t kCap = 1024;  // the default limits.maxConnections
  // The flood's client ends and up to kCap server ends per port live in this process.
  FileLimit files(kFlood + 2 * kCap + 256);
  if (!files.ok()) {
    WARN("skipped: the hard open-file limit " << files.hard() << " is below the " << kFlood + 2 * kCap + 256
                                              << " descriptors this test needs (raise ulimit -Hn)");
    return;
  }
  Stack s;
  auto verbs = s.server(troupe::http::Endpoints::kAll, kCap, "verbs");
  auto probes = s.server(troupe::http::Endpoints::kProbesOnly, kCap, "metrics");

  for (troupe::http::ExtenderServer* target : {probes.get(), verbs.get()}) {
    const int port = portOf(*target);
    const bool is_verbs = target == verbs.get();
    const std::string name = is_verbs ? "verbs" : "metrics";
    INFO("flooded port: " << name);
    const int evicted_before = s.events.count(name + "/evicted_new");
    // Before the flood: a kept-alive connection with a request answered, and one mid-request
    // (its header and half its body sent; the probes' port answers POST /filter 404).
    Conn kept(port);
    REQUIRE(kept.exchange(get("/healthz", true)) == 200);
    Conn midway(port);
    REQUIRE(midway.send(filterHead(kFilterBody.size()) + kFilterBody.substr(0, kFilterBody.size() / 2)));
    REQUIRE(eventually([&] {
      const auto c = target->connectionCounts();
      return c.idle == 1 && c.busy == 1;
    }));

    std::vector<std::unique_ptr<Conn>> flood;
    for (int i = 0; i < kFlood; ++i) {
      flood.push_back(std::make_unique<Conn>(port));
      REQUIRE(flood.back()->ok());
    }
    // All accepted once the oldest kFlood - (kCap - 2) are closed to make room.
    REQUIRE(eventually(
        [&] { return s.events.count(name + "/evicted_new") - evicted_before == kFlood - int(kCap - 2); }));
    CHECK(target->connectionCounts().fresh == kCap - 2);
    CHECK(eventually([&] { return target->connections() <= kCap; }));

    int answered = 0;
    for (int i = 0; i < 10; ++i) answered += Conn(port).exchange(get("/healthz")) == 200;
    CHECK(answered == 10);
    CHECK(Conn(port).exchange(get("/readyz")) == 200);
    CHECK(Conn(portOf(*verbs)).exchange(filter()) == 200);
    // The oldest flood connections are the ones closed; the newest are still held.
    CHECK(flood.front()->closedByServer(std::chrono::milliseconds(2000)));
    CHECK_FALSE(flood.back()->closedByServer(std::chrono::milliseconds(0)));
    // Neither the kept-alive connection nor the one mid-request was closed.
    CHECK(kept.exchange(get("/healthz", true)) == 200);
    CHECK(midway.send(kFilterBody.substr(kFilterBody.size() / 2)));
    CHECK(midway.readStatus() == (is_verbs ? 200 : 404));
    CHECK(s.events.count(name + "/refused") == 0);
    flood.clear();
    REQUIRE(eventually([&] { return target->connections() <= 1; }));  // `kept`
  }
  verbs->stop();
  probes->stop();
}

TEST_CASE("at the cap a listener closes new connections, then a begun header, then the longest idle",
          "[http][flood]") {
  Stack s;
  constexpr size_t kCap = 4;
  auto server = s.server(troupe::http::Endpoints::kAll, kCap, "verbs");
  const int port = portOf(*server);
  auto closed = [&](const char* reason) { return s.events.count(std::string("verbs/") + reason); };
  auto counts = [&] { return server->connectionCounts(); };

  // The four slots: one mid-request, two kept alive (one used long ago, one just now), one
  // with a header begun.
  Conn busy(port);
  REQUIRE(busy.send(filterHead(kFilterBody.size()) + "{"));
  Conn used_long_ago(port);
  REQUIRE(used_long_ago.exchange(get("/healthz", true)) == 200);
  REQUIRE(eventually([&] { return counts().idle == 1; }));  // idle from before the next one
  Conn used_recently(port);
  REQUIRE(used_recently.exchange(get("/healthz", true)) == 200);
  Conn started(port);
  REQUIRE(started.send("GET /hea"));
  REQUIRE(eventually([&] {
    const auto c = counts();
    return c.busy == 1 && c.idle == 2 && c.started == 1;
  }));

  // No new connection to close: the begun header goes.
  Conn a(port);
  CHECK(started.closedByServer(std::chrono::milliseconds(5000)));
  CHECK(closed("evicted_started") == 1);
  REQUIRE(a.exchange(get("/healthz", true)) == 200);  // a is now kept alive, used last
  REQUIRE(eventually([&] { return counts().idle == 3; }));
  // Then the connection idle longest.
  Conn b(port);
  CHECK(used_long_ago.closedByServer(std::chrono::milliseconds(5000)));
  CHECK(closed("evicted_idle") == 1);
  // A newcomer pushes out the previous newcomer, not a connection that earned its slot.
  REQUIRE(eventually([&] { return counts().fresh == 1; }));
  Conn c(port);
  CHECK(b.closedByServer(std::chrono::milliseconds(5000)));
  CHECK(closed("evicted_new") == 1);
  // The connection mid-request and those kept alive with a recent request are all served.
  CHECK(used_recently.exchange(get("/healthz", true)) == 200);
  CHECK(a.exchange(get("/healthz", true)) == 200);
  CHECK(busy.send(kFilterBody.substr(1)));
  CHECK(busy.readStatus() == 200);
  CHECK(c.exchange(get("/healthz")) == 200);
  CHECK(closed("evicted_idle") == 1);
  CHECK(closed("evicted_new") == 1);
}

TEST_CASE("at the cap with every connection mid-request, the new connection is the one closed",
          "[http][flood]") {
  Stack s;
  constexpr size_t kCap = 4;
  auto server = s.server(troupe::http::Endpoints::kAll, kCap, "verbs");
  const int port = portOf(*server);
  std::vector<std::unique_ptr<Conn>> slow;
  while (slow.size() < kCap) {
    slow.push_back(std::make_unique<Conn>(port));
    REQUIRE(slow.back()->send(filterHead(kFilterBody.size()) + "{"));
  }
  REQUIRE(eventually([&] { return server->connectionCounts().busy == kCap; }));
  Conn refused(port);
  CHECK(refused.closedByServer(std::chrono::milliseconds(5000)));
  CHECK(s.events.count("verbs/refused") == 1);
  for (auto& conn : slow) {
    CHECK(conn->send(kFilterBody.substr(1)));
    CHECK(conn->readStatus() == 200);
  }
  CHECK(Conn(port).exchange(get("/healthz")) == 200);
}

TEST_CASE("out of file descriptors the acceptor pauses, frees a slot and keeps serving", "[http][flood]") {
  Stack s;
  auto server = s.server(troupe::http::Endpoints::kAll, 1024, "verbs");
  const int port = portOf(*server);
  // A connection mid-request (the only kind never closed to free a descriptor).
  Conn busy(port);
  REQUIRE(busy.send(filterHead(kFilterBody.size()) + "{"));
  REQUIRE(eventually([&] { return server->connectionCounts().busy == 1; }));

  {
    // No descriptor left and nothing to close: a connection waits in the backlog.
    Exhausted none;
    REQUIRE(none.ok());
    none.release(1);
    Conn waiting(port);  // takes the one released
    REQUIRE(waiting.ok());
    REQUIRE(eventually([&] { return s.events.accept_errors.load() > 0; }));
    // Paused, not spinning: a retry every 100 ms is about 10 failures a second, a spin many
    // thousands; only that upper bound depends on the machine.
    const int before = s.events.accept_errors.load();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    CHECK(s.events.accept_errors.load() - before <= 30);
    // The connections already open are served meanwhile.
    CHECK(busy.send(kFilterBody.substr(1)));
    CHECK(busy.readStatus() == 200);
  }
  // Descriptors again: the waiting connection was accepted at a retry and closed by the client.

  std::vector<std::unique_ptr<Conn>> idle;
  for (int i = 0; i < 10; ++i) idle.push_back(std::make_unique<Conn>(port));
  // All ten accepted, and the one from before closed (nothing left in the backlog).
  REQUIRE(eventually([&] { return server->connectionCounts().fresh == 10 && server->connections() == 10; }));
  {
    // No descriptor left, idle connections to close: a probe gets the one freed by closing the
    // oldest of them. Linux fails accept() with EMFILE before it looks at the backlog, so once
    // the probe took that descriptor the next accept closes one more, and the acceptor holds
    // a free descriptor for the next connection; then it waits, closing nothing more.
    Exhausted none;
    REQUIRE(none.ok());
    none.release(1);
    const int evicted = s.events.count("verbs/evicted_new");
    Conn probe(port);
    REQUIRE(probe.ok());
    CHECK(probe.exchange(get("/healthz")) == 200);
    CHECK(idle[0]->closedByServer(std::chrono::milliseconds(2000)));
    CHECK(eventually([&] { return s.events.count("verbs/evicted_new") == evicted + 2; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    CHECK(s.events.count("verbs/evicted_new") == evicted + 2);
    CHECK_FALSE(idle[2]->closedByServer(std::chrono::milliseconds(0)));
  }
  // The warning is logged once (then at most every 10 s), not once per failure.
  const std::string log = s.log_sink.str();
  size_t warnings = 0;
  for (size_t at = log.find("accepting connections failed"); at != std::string::npos;
       at = log.find("accepting connections failed", at + 1)) {
    ++warnings;
  }
  CHECK(warnings == 1);
  idle.clear();
  CHECK(Conn(port).exchange(filter()) == 200);
}
