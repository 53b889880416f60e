#include "loadgen.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>

namespace troupe::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  int fd = -1;
  const std::string* request = nullptr;
  size_t sent = 0;
  std::string in;
  Clock::time_point start;
  bool in_flight = false;
  bool want_write = false;
};

int connectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Case-insensitive search for a header's value in the head of a response; -1 when absent.
long headerNumber(const std::string& head, const char* name) {
  const size_t n = std::strlen(name);
  for (size_t pos = head.find("\r\n"); pos != std::string::npos && pos + 2 < head.size();
       pos = head.find("\r\n", pos + 2)) {
    const size_t line = pos + 2;
    if (head.size() - line > n && strncasecmp(head.c_str() + line, name, n) == 0 && head[line + n] == ':') {
      return std::strtol(head.c_str() + line + n + 1, nullptr, 10);
    }
  }
  return -1;
}

bool hasHeaderValue(const std::string& head, const char* name, const char* value) {
  const size_t n = std::strlen(name);
  for (size_t pos = head.find("\r\n"); pos != std::string::npos && pos + 2 < head.size();
       pos = head.find("\r\n", pos + 2)) {
    const size_t line = pos + 2;
    if (head.size() - line > n && strncasecmp(head.c_str() + line, name, n) == 0 && head[line + n] == ':') {
      const size_t end = head.find("\r\n", line);
      std::string v = head.substr(line + n + 1, end - line - n - 1);
      std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
      return v.find(value) != std::string::npos;
    }
  }
  return false;
}

double percentile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

namespace {

// "6.30ms", "812.00us", "1.02s", "1.50m" -> milliseconds; -1 when unreadable.
double wrkDuration(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return -1;
  const std::string unit(end);
  if (unit == "us") return v / 1000;
  if (unit == "ms") return v;
  if (unit == "s") return v * 1000;
  if (unit == "m") return v * 60000;
  return -1;
}

}  // namespace

bool runWrk(int port, const std::string& path, const std::string& body, int connections, double seconds,
            LoadResult* out, std::string* error) {
  if (std::system("command -v wrk >/dev/null 2>&1") != 0) {
    *error = "wrk is not installed";
    return false;
  }
  char script[] = "/tmp/troupe-bench-wrk-XXXXXX";
  const int fd = ::mkstemp(script);
  if (fd < 0) {
    *error = std::string("mkstemp: ") + std::strerror(errno);
    return false;
  }
  const std::string lua =
      "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"
      "wrk.body = [==[" +
      body + "]==]\n";
  const bool written = ::write(fd, lua.data(), lua.size()) == static_cast<ssize_t>(lua.size());
  ::close(fd);
  const int whole_seconds = std::max(1, static_cast<int>(std::lround(seconds)));
  const std::string cmd = "wrk -t2 -c" + std::to_string(connections) + " -d" + std::to_string(whole_seconds) +
                          "s --latency -s " + script + " http://127.0.0.1:" + std::to_string(port) + path +
                          " 2>&1";
  std::string text;
  if (written) {
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
      ::pclose(p);
    }
  }
  ::unlink(script);
  *out = LoadResult{};
  out->client = "wrk";
  out->connections = connections;
  out->seconds = whole_seconds;
  bool have_rps = false;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string first, second, third;
    words >> first >> second >> third;
    if (first == "Requests/sec:") {
      out->rps = std::strtod(second.c_str(), nullptr);
      have_rps = true;
    } else if (first == "Latency" && wrkDuration(second) >= 0) {  // not "Latency Distribution"
      out->mean_ms = wrkDuration(second);
    } else if (first == "50%") {
      out->p50_ms = wrkDuration(second);
    } else if (first == "99%") {
      out->p99_ms = wrkDuration(second);
    } else if (second == "requests" && third == "in") {
      out->requests = std::strtoull(first.c_str(), nullptr, 10);
    } else if (first == "Non-2xx") {  // "Non-2xx or 3xx responses: N"
      std::string word;
      while (words >> word) out->errors = std::strtoull(word.c_str(), nullptr, 10);
    } else if (first == "Socket" && second == "errors:") {
      out->first_error = line;
    }
  }
  if (!have_rps) {
    *error = "could not read wrk's output: " + text.substr(0, 300);
    return false;
  }
  return true;
}

int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

LoadResult runLoad(int port, const std::string& path, const std::vector<std::string>& bodies, int connections,
                   double seconds, double warmup_seconds) {
  LoadResult out;
  out.connections = connections;
  // Requests as Go's net/http client writes them for kube-scheduler.
  std::vector<std::string> requests;
  for (const std::string& body : bodies) {
    requests.push_back(
        "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
        "\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n" + body);
  }
  if (requests.empty() || connections < 1) return out;

  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Conn> conns(static_cast<size_t>(connections));
  size_t next_request = 0;
  auto note = [&](const std::string& what) {
    ++out.errors;
    if (out.first_error.empty()) out.first_error = what;
  };
  auto watch = [&](size_t i, bool write) {
    epoll_event ev{};
    ev.events = write ? EPOLLOUT : EPOLLIN;
    ev.data.u64 = i;
    ::epoll_ctl(ep, EPOLL_CTL_MOD, conns[i].fd, &ev);
    conns[i].want_write = write;
  };
  auto open = [&](size_t i) -> bool {
    Conn& c = conns[i];
    c = Conn{};
    c.fd = connectLoopback(port);
    if (c.fd < 0) return false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
    return true;
  };
  auto pump = [&](size_t i) -> bool {  // writes what it can; false on a broken connection
    Conn& c = conns[i];
    while (c.sent < c.request->size()) {
      ssize_t n = ::send(c.fd, c.request->data() + c.sent, c.request->size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!c.want_write) watch(i, true);
        return true;
      }
      return false;
    }
    if (c.want_write) watch(i, false);
    return true;
  };
  auto send_next = [&](size_t i) -> bool {
    Conn& c = conns[i];
    c.request = &requests[next_request++ % requests.size()];
    c.sent = 0;
    c.in.clear();
    c.start = Clock::now();
    c.in_flight = true;
    return pump(i);
  };
  auto reopen = [&](size_t i) {
    if (conns[i].fd >= 0) {
      ::epoll_ctl(ep, EPOLL_CTL_DEL, conns[i].fd, nullptr);
      ::close(conns[i].fd);
    }
    conns[i].fd = -1;
    return open(i) && send_next(i);
  };

  for (size_t i = 0; i < conns.size(); ++i) {
    if (!open(i)) {
      note("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno));
      ::close(ep);
      return out;
    }
  }
  const auto begin = Clock::now();
  const auto window_start =
      begin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup_seconds));
  const auto window_end =
      window_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (size_t i = 0; i < conns.size(); ++i) {
    if (!send_next(i)) note("send failed");
  }
  std::vector<double> latencies;
  latencies.reserve(1 << 20);
  std::vector<epoll_event> events(conns.size());
  char buf[65536];
  // After the window, no new requests: the answers in flight are read (for up to 10 s) so
  // that no request is still inside the server when the caller stops it.
  const auto drain_end = window_end + std::chrono::seconds(10);
  auto in_flight = [&] {
    return std::any_of(conns.begin(), conns.end(), [](const Conn& c) { return c.fd >= 0 && c.in_flight; });
  };
  for (;;) {
    const auto tick = Clock::now();
    if (tick >= drain_end || (tick >= window_end && !in_flight())) break;
    int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 50);
    if (n < 0 && errno != EINTR) break;
    for (int e = 0; e < n; ++e) {
      const size_t i = events[static_cast<size_t>(e)].data.u64;
      Conn& c = conns[i];
      if (c.want_write) {
        if (!pump(i)) {
          note("connection broken while sending");
          if (!reopen(i)) note("reconnect failed");
        }
        continue;
      }
      bool broken = false;
      for (;;) {
        ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
        if (r > 0) {
          c.in.append(buf, static_cast<size_t>(r));
          continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        broken = true;  // closed by the server or an error
        break;
      }
      const size_t head_end = c.in.find("\r\n\r\n");
      if (head_end != std::string::npos && c.in_flight) {
        const std::string head = c.in.substr(0, head_end + 2);
        const long length = headerNumber(head, "Content-Length");
        if (length < 0) {
          note(hasHeaderValue(head, "Transfer-Encoding", "chunked")
                   ? "the server answered with a chunked body; this client reads Content-Length only"
                   : "answer without Content-Length");
          broken = true;
        } else if (c.in.size() >= head_end + 4 + static_cast<size_t>(length)) {
          const auto now = Clock::now();
          const bool ok = c.in.compare(0, 12, "HTTP/1.1 200") == 0;
          if (!ok) {
            note("answer " + c.in.substr(0, c.in.find("\r\n")) + ": " +
                 c.in.substr(head_end + 4, std::min<size_t>(200, static_cast<size_t>(length))));
          } else if (now >= window_start && now < window_end) {
            ++out.requests;
            latencies.push_back(std::chrono::duration<double, std::milli>(now - c.start).count());
          }
          c.in_flight = false;
          const bool closing = hasHeaderValue(head, "Connection", "close");
          if (now >= window_end) {
            c.in.clear();  // draining: send nothing more
          } else if (closing || broken) {
            if (!reopen(i)) note("reconnect failed");
          } else if (!send_next(i)) {
            note("send failed");
            if (!reopen(i)) note("reconnect failed");
          }
          continue;
        }
      }
      if (broken) {
        note("connection closed by the server mid-answer");
        if (Clock::now() >= window_end) {
          ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
          ::close(c.fd);
          c.fd = -1;
        } else if (!reopen(i)) {
          note("reconnect failed");
        }
      }
    }
  }
  if (in_flight()) note("answers still missing 10 s after the end of the run");
  const auto end = std::min(Clock::now(), window_end);
  for (Conn& c : conns) {
    if (c.fd >= 0) ::close(c.fd);
  }
  ::close(ep);
  out.seconds = std::chrono::duration<double>(end - window_start).count();
  out.rps = out.seconds > 0 ? static_cast<double>(out.requests) / out.seconds : 0;
  std::sort(latencies.begin(), latencies.end());
  out.p50_ms = percentile(latencies, 0.50);
  out.p99_ms = percentile(latencies, 0.99);
  out.max_ms = latencies.empty() ? 0 : latencies.back();
  out.mean_ms = latencies.empty() ? 0
                                  : std::accumulate(latencies.begin(), latencies.end(), 0.0) /
                                        static_cast<double>(latencies.size());
  return out;
}

}  // namespace troupe::bench
