// ExtenderServer: the HTTP/1.1 listener, on Boost.Beast over Asio (and asio::ssl over OpenSSL
// for HTTPS). docs/http-server.md has the measurements that made us leave cpprestsdk's
// listener and the design; in short, everything a client sends is bounded while it is read:
//
//   - the header section by ServerLimits::max_header_bytes (431), in a buffer that cannot grow
//     past it;
//   - the body by maxBodyBytes: a declared Content-Length over it is answered 413 before any of
//     the body is read and without allocating it; a chunked body is cut off at the limit;
//   - all bodies together by max_body_bytes_in_flight, counted as they arrive (503);
//   - time: a header must arrive within header_timeout, a whole request within read_timeout,
//     the next request on a kept-alive connection within idle_timeout; answers are written
//     within write_timeout;
//   - connections by max_connections: at the cap, a new connection closes the one that least
//     earned its slot (ConnectionTable: never sent a byte, then a header begun and not done,
//     then idle longest), never one mid-request; out of file descriptors, the acceptor does
//     the same and pauses instead of spinning.
//
// Threads: `io_threads` run the sockets and answer /healthz and /readyz themselves, so probes
// answer while every worker is busy; `worker_threads` run the verbs and /metrics. A bind parked
// at a gang barrier holds no thread: its answer is posted back to the connection when it comes.
#include <malloc.h>
#include <sys/ioctl.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <future>
#include <thread>
#include <vector>

#include "adapters/http/connection_table.h"
#include "adapters/http/extender_server.h"
#include "adapters/http/request_drain.h"
#include "adapters/http/tls_context.h"
#include "adapters/http/wire.h"

namespace troupe::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

constexpr size_t kReadChunk = 16 << 10;
// A new connection's first read: enough for a probe's whole request, small enough that a flood
// of silent connections costs little memory (the buffer grows when a request needs it).
constexpr size_t kFirstReadChunk = 1 << 10;
// After an answer that refuses a body still on its way (413, 431, 503), the rest is read and
// dropped for a moment before closing, so the client sees the answer instead of a reset.
constexpr auto kLingerTime = std::chrono::milliseconds(500);
constexpr size_t kLingerBytes = 1 << 20;
// Bodies this large leave freed heap worth returning to the system (malloc_trim) afterwards,
// at most once per kTrimEvery.
constexpr size_t kTrimAfterBytes = 4 << 20;
constexpr auto kTrimEvery = std::chrono::seconds(2);
// After a failed accept (out of file descriptors, say) the connection stays in the backlog, so
// accepting again at once fails again at once: the acceptor waits this long first.
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);
// Warnings that a flood repeats thousands of times a second are logged at most this often.
constexpr auto kWarnEvery = std::chrono::seconds(10);

// The verbs' threads: a plain queue, so that stop() can leave a thread stuck in handler code
// behind (detach) instead of hanging on it.
class WorkerPool {
 public:
  explicit WorkerPool(int threads) : state_(std::make_shared<State>()) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([state = state_] { run(*state); });
  }
  ~WorkerPool() { stop(true); }
  void post(std::function<void()> job) {
    {
      std::lock_guard lock(state_->mu);
      state_->jobs.push_back(std::move(job));
    }
    state_->cv.notify_one();
  }
  // Runs what is queued, then ends the threads: joins them, or detaches them when a handler
  // is known to be stuck (they end when it returns; the state is shared).
  void stop(bool join) {
    {
      std::lock_guard lock(state_->mu);
      state_->stopping = true;
    }
    state_->cv.notify_all();
    for (std::thread& t : threads_) {
      if (!t.joinable()) continue;
      if (join) {
        t.join();
      } else {
        t.detach();
      }
    }
    threads_.clear();
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> jobs;
    bool stopping = false;
  };
  static void run(State& s) {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(s.mu);
        s.cv.wait(lock, [&] { return s.stopping || !s.jobs.empty(); });
        if (s.jobs.empty()) return;
        job = std::move(s.jobs.front());
        s.jobs.pop_front();
      }
      job();  // jobs catch their own exceptions
    }
  }
  std::shared_ptr<State> state_;
  std::vector<std::thread> threads_;
};

// A warning that may come thousands of times a second (a connection flood, no file
// descriptors left): logged the first time, then at most once per kWarnEvery with how many
// times it happened since. Used on one strand only.
class ThrottledWarning {
 public:
  // The number of times since the last log (this one included) when it is time to log; 0 if not.
  uint64_t due() {
    ++times_;
    const Clock::time_point now = Clock::now();
    if (logged_ && now - last_ < kWarnEvery) return 0;
    logged_ = true;
    last_ = now;
    return std::exchange(times_, 0);
  }

 private:
  bool logged_ = false;
  Clock::time_point last_;
  uint64_t times_ = 0;
};

// What the listener and its connections share. Connections hold it (and the io_context) by
// shared_ptr: one may outlive the server object for a moment, held by an answer on its way.
struct Shared {
  ExtenderHandler* handler = nullptr;  // touched only by admitted requests (see RequestDrain)
  adapters::Logger* logger = nullptr;
  ServerOptions options;
  size_t max_body_bytes = 0;
  std::shared_ptr<RequestDrain> drain = std::make_shared<RequestDrain>();
  std::unique_ptr<TlsReloader> tls;
  std::atomic<size_t> connections{0};  // sessions alive, evicted ones still closing included
  ConnectionTable table;               // the connections that hold a slot, by phase
  std::atomic<size_t> body_bytes{0};   // reserved by requests being read or handled
  std::atomic<int64_t> last_trim{0};   // Clock ticks
  std::shared_ptr<WorkerPool> workers;
  std::shared_ptr<net::io_context> ioc;

  bool reserveBody(size_t n) {
    size_t cur = body_bytes.load();
    do {
      if (n > options.limits.max_body_bytes_in_flight || cur > options.limits.max_body_bytes_in_flight - n)
        return false;
    } while (!body_bytes.compare_exchange_weak(cur, cur + n));
    return true;
  }
  void releaseBody(size_t n) { body_bytes.fetch_sub(n); }

  void internalError(std::string_view where, const char* what) {
    logger->error("internal error", {{"where", std::string(where)}, {"error", what}});
    handler_errors.count(std::string(where));  // never throws
  }
  adapters::InternalErrors handler_errors;

  // Returns freed heap to the system after large requests (glibc keeps it otherwise; review L3).
  void maybeTrim(size_t body_size) {
    if (body_size < kTrimAfterBytes) return;
    const int64_t now = Clock::now().time_since_epoch().count();
    int64_t last = last_trim.load();
    if (now - last < std::chrono::duration_cast<Clock::duration>(kTrimEvery).count()) return;
    if (!last_trim.compare_exchange_strong(last, now)) return;
#ifdef __GLIBC__
    malloc_trim(0);
#endif
  }
};

// Body bytes reserved against Shared::body_bytes, released when the request is done with.
class BodyReservation {
 public:
  BodyReservation(std::shared_ptr<Shared> shared, size_t bytes) : shared_(std::move(shared)), bytes_(bytes) {}
  ~BodyReservation() { release(); }
  BodyReservation(const BodyReservation&) = delete;
  BodyReservation& operator=(const BodyReservation&) = delete;
  void release() {
    if (shared_ && bytes_) shared_->releaseBody(bytes_);
    bytes_ = 0;
  }

 private:
  std::shared_ptr<Shared> shared_;
  size_t bytes_;
};

// "http://host/filter" (absolute form, RFC 9112 3.2.2) -> "/filter"; anything else as is.
std::string originForm(std::string_view target) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() >= scheme.size() && beast::iequals(target.substr(0, scheme.size()), scheme)) {
      const size_t slash = target.find('/', scheme.size());
      return slash == std::string_view::npos ? "/" : std::string(target.substr(slash));
    }
  }
  return std::string(target);
}

bool isParseError(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::need_more).category();
}

template <class Stream>
class Session : public ConnectionTable::Member, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(std::shared_ptr<Shared> shared, Stream stream, std::shared_ptr<net::ssl::context> tls)
      : shared_(std::move(shared)),
        tls_(std::move(tls)),
        stream_(std::move(stream)),
        buffer_(shared_->options.limits.max_header_bytes + 2 * kReadChunk),
        fd_(beast::get_lowest_layer(stream_).socket().native_handle()) {
    ++shared_->connections;
  }
  ~Session() override {
    shared_->table.remove(id_);
    --shared_->connections;
  }

  void start(uint64_t id) {
    id_ = id;
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      lowest().expires_after(limits().header_timeout);
      stream_.async_handshake(
          net::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
            if (ec) {
              // No certificate, a wrong one, or not TLS at all.
              self->shared_->logger->debug("TLS handshake failed", {{"error", ec.message()}});
              if (ec == beast::error::timeout) self->countClosed(adapters::kClosedHeaderTimeout);
              self->closeNow();
              return;
            }
            self->waitForRequest();
          });
    } else {
      waitForRequest();
    }
  }

  void close() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->closeNow(); });
  }
  // Called by the acceptor's thread: only the kernel is asked (the descriptor, not the stream).
  bool requestWaiting() const override {
    const int fd = fd_.load();
    int waiting = 0;
    return fd >= 0 && ::ioctl(fd, FIONREAD, &waiting) == 0 && waiting > 0;
  }

 private:
  const ServerLimits& limits() const { return shared_->options.limits; }
  void countClosed(const char* reason) { shared_->options.events.closed(reason); }

  // Moves the connection to `phase` in the table; false (and closed) when it was evicted.
  bool enter(ConnectionTable::Phase phase) {
    if (shared_->table.enter(id_, phase)) return true;
    closeNow();
    return false;
  }
  // A request's first byte is here: on a connection that has not completed one yet it is only
  // a start (a slow or idle client can be evicted); on a kept-alive one, a request.
  bool requestBegins() {
    return enter(first_ ? ConnectionTable::Phase::kStarted : ConnectionTable::Phase::kBusy);
  }
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // Between requests: the idle (or, on a new connection, the header) timeout runs until the
  // first byte of the next request arrives.
  void waitForRequest() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits().max_header_bytes));
    parser_->body_limit(shared_->max_body_bytes);
    close_after_ = false;
    if (buffer_.size() > 0) {  // a pipelined request is already here
      if (requestBegins()) readHeader();
      return;
    }
    lowest().expires_after(first_ ? limits().header_timeout : limits().idle_timeout);
    stream_.async_read_some(
        buffer_.prepare(first_ ? kFirstReadChunk : kReadChunk),
        [self = this->shared_from_this()](beast::error_code ec, size_t n) {
          if (ec) {
            if (ec == beast::error::timeout) {
              self->countClosed(self->first_ ? adapters::kClosedHeaderTimeout : adapters::kClosedIdleTimeout);
            }
            self->closeNow();  // a timeout, or the client closed
            return;
          }
          self->buffer_.commit(n);
          if (self->requestBegins()) self->readHeader();
        });
  }

  void readHeader() {
    // Beast reads as much as the buffer's capacity holds: after a 1 KiB first read, grow it so
    // that large headers and bodies are read 16 KiB at a time.
    if (buffer_.capacity() < kReadChunk) buffer_.reserve(kReadChunk);
    request_start_ = Clock::now();
    lowest().expires_after(limits().header_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               if (ec) {
                                 self->readFailed(ec);
                                 return;
                               }
                               self->headerRead();
                             });
  }

  // The request line, known once the parser has read it (also when it then refuses the header).
  void noteRequestLine() {
    auto& req = parser_->get();
    method_ = std::string(req.method_string());
    path_ = originForm(req.target());
  }

  void headerRead() {
    if (!enter(ConnectionTable::Phase::kBusy)) return;
    auto& req = parser_->get();
    noteRequestLine();
    lowest().expires_at(request_start_ + limits().read_timeout);
    if (parser_->is_done()) {
      dispatch();
      return;
    }
    if (beast::iequals(req[bhttp::field::expect], "100-continue")) {
      // curl asks before sending a large body; the body is within the limits, so go ahead.
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(kContinue),
                       [self = this->shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) {
                           self->closeNow();
                           return;
                         }
                         self->readBody();
                       });
      return;
    }
    readBody();
  }

  void readBody() {
    bhttp::async_read_some(stream_, buffer_, *parser_,
                           [self = this->shared_from_this()](beast::error_code ec, size_t) {
                             if (ec) {
                               self->readFailed(ec);
                               return;
                             }
                             // The body reserves what has arrived, not what it declared: a
                             // slow client announcing 64 MiB holds only what it has sent.
                             const size_t size = self->parser_->get().body().size();
                             if (size > self->reserved_ && !self->reserve(size - self->reserved_)) return;
                             if (self->parser_->is_done()) {
                               self->dispatch();
                             } else {
                               self->readBody();
                             }
                           });
  }

  bool reserve(size_t n) {
    if (!shared_->reserveBody(n)) {
      reject(503, "request bodies in flight are over the limit of " +
                      std::to_string(limits().max_body_bytes_in_flight) +
                      " bytes (limits.maxBodyBytesInFlight); retry shortly");
      return false;
    }
    reserved_ += n;
    return true;
  }

  void releaseReserved() {
    if (reserved_) shared_->releaseBody(reserved_);
    reserved_ = 0;
  }

  void readFailed(const beast::error_code& ec) {
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
      reject(431, "request header section is over the limit of " + std::to_string(limits().max_header_bytes) +
                      " bytes (limits.maxHeaderBytes)");
    } else if (ec == bhttp::error::body_limit) {
      // Refused before the body was read when its length was declared; a chunked one stops here.
      noteRequestLine();
      tooLarge(declaredLength());
    } else if (ec == bhttp::error::bad_content_length) {
      reject(400, "invalid Content-Length header: it must be one non-negative decimal number");
    } else if (ec == bhttp::error::bad_transfer_encoding) {
      reject(400,
             "invalid Transfer-Encoding header: only chunked is accepted, and not together with "
             "Content-Length");
    } else if (ec == beast::error::timeout) {
      const bool header_done = parser_->is_header_done();
      shared_->logger->debug("closed a connection that was too slow to send its request",
                             {{"phase", header_done ? "body" : "header"}});
      countClosed(header_done ? adapters::kClosedReadTimeout : adapters::kClosedHeaderTimeout);
      closeNow();
    } else if (isParseError(ec) && ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
      reject(400, "malformed HTTP request: " + ec.message());
    } else {
      closeNow();  // the client closed or reset the connection, or TLS failed
    }
  }

  // The Content-Length the client sent (the parser has read the fields when it refuses it).
  std::optional<uint64_t> declaredLength() {
    const std::string_view text = parser_->get()[bhttp::field::content_length];
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return n;
  }

  void tooLarge(std::optional<uint64_t> declared) {
    close_after_ = true;
    linger_ = true;
    auto self = this->shared_from_this();
    admitAndRun(/*inline=*/true, [self, declared](ExtenderHandler& h, const Reply& reply) {
      reply(h.tooLarge(self->path_, declared));
    });
  }

  // Answers a request that is refused while being read, and closes the connection (the rest
  // of the request is not read).
  void reject(int status, const std::string& message) {
    close_after_ = true;
    linger_ = true;
    write(HttpResponse{status, encodeHttpError(message), "application/json"}, nullptr);
  }

  void dispatch() {
    lowest().expires_never();
    auto& req = parser_->get();
    if (!req.keep_alive()) close_after_ = true;
    version_ = req.version();
    auto body = std::make_shared<std::string>(std::move(req.body()));
    auto reservation = std::make_shared<BodyReservation>(shared_, reserved_);
    reserved_ = 0;  // the reservation goes with the body
    const bool probe = method_ == "GET" && (path_ == "/healthz" || path_ == "/readyz");
    const Endpoints endpoints = shared_->options.endpoints;
    std::string method = method_, path = path_;
    std::shared_ptr<Shared> shared = shared_;
    admitAndRun(probe,
                [method, path, body, reservation, endpoints, shared](ExtenderHandler& h, const Reply& reply) {
                  h.handleAsync(method, path, *body, reply, endpoints);
                  const size_t size = body->size();
                  body->clear();
                  body->shrink_to_fit();
                  reservation->release();
                  shared->maybeTrim(size);
                });
  }

  // Admits the request (or answers that the server is shutting down) and runs `work` with
  // the handler, on this thread or on a worker.
  void admitAndRun(bool run_inline, std::function<void(ExtenderHandler&, const Reply&)> work) {
    auto self = this->shared_from_this();
    RequestDrain::Send send = [self](const HttpResponse& r, std::function<void()> sent) {
      net::post(self->stream_.get_executor(),
                [self, r, sent = std::move(sent)]() mutable { self->write(std::move(r), std::move(sent)); });
    };
    std::optional<RequestDrain::Admission> admitted =
        shared_->drain->admit(send, ExtenderHandler::shuttingDown(path_, "the request was still pending"));
    if (!admitted) {
      close_after_ = true;
      write(ExtenderHandler::shuttingDown(path_, "no new requests are taken"), nullptr);
      return;
    }
    std::shared_ptr<RequestDrain::Call> call = admitted->call;
    std::shared_ptr<RequestDrain::Running> running = admitted->running;
    Reply reply = [call](HttpResponse r) { call->answer(r); };
    std::shared_ptr<Shared> shared = shared_;
    const std::string path = path_;
    auto job = [shared, work = std::move(work), reply, running, path] {
      try {
        work(*shared->handler, reply);
      } catch (const std::exception& e) {
        reply(shared->handler->internalError("http", path, e.what()));
      } catch (...) {
        reply(shared->handler->internalError("http", path, "unknown exception"));
      }
      running->release();
    };
    if (run_inline) {
      job();
    } else {
      shared_->workers->post(std::move(job));
    }
  }

  // Writes an answer; `sent` is called once it is written (or failed). Runs on the stream's
  // strand.
  void write(HttpResponse r, std::function<void()> sent) {
    releaseReserved();  // a refused body is not read any further
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>();
    res->version(version_ == 10 ? 10 : 11);
    res->result(static_cast<unsigned>(r.status));
    res->set(bhttp::field::content_type, r.content_type);
    res->body() = std::move(r.body);
    res->keep_alive(!close_after_);
    res->prepare_payload();
    lowest().expires_after(limits().write_timeout);
    bhttp::async_write(
        stream_, *res,
        [self = this->shared_from_this(), res, sent = std::move(sent)](beast::error_code ec, size_t) {
          if (sent) sent();
          if (ec) {
            if (ec == beast::error::timeout) self->countClosed(adapters::kClosedWriteTimeout);
            self->closeNow();
          } else if (self->close_after_) {
            self->finish();
          } else {
            self->first_ = false;  // the slot is earned: idle from now on, not new
            if (self->enter(ConnectionTable::Phase::kIdle)) self->waitForRequest();
          }
        });
  }

  // Closes after the last answer: for a refused body, reads and drops what is still coming
  // for a moment first (see kLingerTime).
  void finish() {
    if constexpr (std::is_same_v<Stream, PlainStream>) {
      if (linger_) {
        beast::error_code ignored;
        lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
        lowest().expires_after(kLingerTime);
        discard();
        return;
      }
    }
    closeNow();
  }

  void discard() {
    auto scratch = std::make_shared<std::array<char, kReadChunk>>();
    lowest().async_read_some(net::buffer(*scratch),
                             [self = this->shared_from_this(), scratch](beast::error_code ec, size_t n) {
                               self->lingered_ += n;
                               if (ec || self->lingered_ > kLingerBytes) {
                                 self->closeNow();
                               } else {
                                 self->discard();
                               }
                             });
  }

  void closeNow() {
    fd_.store(-1);
    releaseReserved();
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    lowest().close();
  }

  std::shared_ptr<Shared> shared_;
  // Outlives stream_ (declared first): a session held by an answer still on its way after
  // stop() must not outlive the io_context its socket belongs to.
  std::shared_ptr<net::io_context> ioc_ = shared_->ioc;
  std::shared_ptr<net::ssl::context> tls_;  // outlives stream_
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  uint64_t id_ = 0;
  Clock::time_point request_start_;
  std::string method_, path_;
  unsigned version_ = 11;
  size_t reserved_ = 0;  // body bytes reserved for the request being read
  size_t lingered_ = 0;
  bool first_ = true;  // no request answered on this connection yet
  bool close_after_ = false;
  bool linger_ = false;
  std::atomic<int> fd_;  // the socket's descriptor for requestWaiting; -1 once closed
};

}  // namespace

struct ExtenderServer::Impl {
  std::string host;
  int port;
  ExtenderHandler& handler;
  adapters::Logger& logger;
  ServerOptions options;
  std::shared_ptr<Shared> shared;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<net::steady_timer> accept_retry;      // on the acceptor's strand
  ThrottledWarning evicting, refusing, accept_failing;  // the acceptor's strand
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  bool started = false;

  void accept();
  void onAccept(beast::error_code ec, tcp::socket socket);
  bool makeRoom();
  void acceptFailed(const beast::error_code& ec);
  template <class Stream>
  void startSession(std::shared_ptr<Session<Stream>> session);
};

void ExtenderServer::Impl::accept() {
  acceptor->async_accept(net::make_strand(*shared->ioc), [this](beast::error_code ec, tcp::socket socket) {
    onAccept(ec, std::move(socket));
  });
}

void ExtenderServer::Impl::onAccept(beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor->is_open()) return;  // stop()
  if (ec) {
    acceptFailed(ec);
    return;
  }
  if (shared->table.size() >= shared->options.limits.max_connections && !makeRoom()) {
    // Every connection is mid-request: this one waits for none of them.
    shared->options.events.closed(adapters::kClosedRefused);  // counted first: tests watch the close
    beast::error_code ignored;
    socket.close(ignored);
    if (const uint64_t n = refusing.due()) {
      logger.warn("connections refused: every connection is mid-request at limits.maxConnections",
                  {{"url", host + ":" + std::to_string(port)},
                   {"limit", std::to_string(shared->options.limits.max_connections)},
                   {"refused", std::to_string(n)}});
    }
  } else {
    socket.set_option(tcp::no_delay(true), ec);
    if (shared->tls) {
      std::shared_ptr<net::ssl::context> ctx = shared->tls->current();
      startSession(std::make_shared<Session<TlsStream>>(shared, TlsStream(std::move(socket), *ctx), ctx));
    } else {
      startSession(std::make_shared<Session<PlainStream>>(shared, PlainStream(std::move(socket)), nullptr));
    }
  }
  accept();
}

// Closes the connection that least earned its slot (ConnectionTable's order); false when
// every connection is mid-request.
bool ExtenderServer::Impl::makeRoom() {
  std::optional<ConnectionTable::Evicted> victim = shared->table.evictOne();
  if (!victim) return false;
  const char* reason = victim->phase == ConnectionTable::Phase::kNew       ? adapters::kClosedEvictedNew
                       : victim->phase == ConnectionTable::Phase::kStarted ? adapters::kClosedEvictedStarted
                                                                           : adapters::kClosedEvictedIdle;
  shared->options.events.closed(reason);
  if (victim->member) victim->member->close();  // null: it is being destroyed anyway
  if (const uint64_t n = evicting.due()) {
    logger.warn("closing the connections that least earned their slot: limits.maxConnections reached",
                {{"url", host + ":" + std::to_string(port)},
                 {"limit", std::to_string(shared->options.limits.max_connections)},
                 {"closed", std::to_string(n)}});
  }
  return true;
}

// A failed accept leaves the connection in the backlog, so the acceptor pauses before the next
// try instead of spinning on the same error. Out of file descriptors (or kernel memory), it
// first closes a connection that has not earned its slot, so the next try has one.
void ExtenderServer::Impl::acceptFailed(const beast::error_code& ec) {
  shared->options.events.acceptFailed();
  const bool out_of_descriptors = ec == net::error::no_descriptors ||
                                  ec == boost::system::errc::too_many_files_open_in_system ||
                                  ec == net::error::no_buffer_space || ec == net::error::no_memory;
  if (const uint64_t n = accept_failing.due()) {
    logger.warn(
        "accepting connections failed; retrying every " + std::to_string(kAcceptRetry.count()) + " ms",
        {{"url", host + ":" + std::to_string(port)},
         {"error", ec.message()},
         {"failures", std::to_string(n)},
         {"hint", out_of_descriptors ? "raise the open-file limit (ulimit -n, the container runtime's "
                                       "LimitNOFILE) or lower limits.maxConnections"
                                     : "see the error"}});
  }
  if (out_of_descriptors) makeRoom();
  accept_retry->expires_after(kAcceptRetry);
  accept_retry->async_wait([this](beast::error_code wait_ec) {
    if (!wait_ec && acceptor->is_open()) accept();
  });
}

template <class Stream>
void ExtenderServer::Impl::startSession(std::shared_ptr<Session<Stream>> session) {
  session->start(shared->table.add(session));
}

ExtenderServer::ExtenderServer(std::string host, int port, ExtenderHandler& handler, adapters::Logger& logger,
                               ServerOptions options)
    : impl_(std::make_unique<Impl>(Impl{std::move(host),
                                        port,
                                        handler,
                                        logger,
                                        std::move(options),
                                        nullptr,
                                        nullptr,
                                        nullptr,
                                        {},
                                        {},
                                        {},
                                        std::nullopt,
                                        {},
                                        false})) {}

ExtenderServer::~ExtenderServer() { stop(); }

std::string ExtenderServer::url() const {
  const bool v6 = impl_->host.find(':') != std::string::npos;
  return std::string(impl_->options.tls ? "https://" : "http://") + (v6 ? "[" : "") + impl_->host +
         (v6 ? "]" : "") + ":" + std::to_string(impl_->port);
}

int ExtenderServer::inFlight() const { return impl_->shared ? impl_->shared->drain->open() : 0; }

size_t ExtenderServer::connections() const { return impl_->shared ? impl_->shared->connections.load() : 0; }

ExtenderServer::ConnectionCounts ExtenderServer::connectionCounts() const {
  if (!impl_->shared) return {};
  const ConnectionTable& t = impl_->shared->table;
  using Phase = ConnectionTable::Phase;
  return {t.count(Phase::kNew), t.count(Phase::kStarted), t.count(Phase::kIdle), t.count(Phase::kBusy)};
}

Status ExtenderServer::start() {
  Impl& m = *impl_;
  if (m.started) return Status::ok();
  auto shared = std::make_shared<Shared>();
  shared->handler = &m.handler;
  shared->logger = &m.logger;
  shared->options = m.options;
  shared->handler_errors = m.handler.internalErrors();
  shared->max_body_bytes = m.handler.maxBodyBytes();
  ServerLimits& limits = shared->options.limits;
  limits.max_body_bytes_in_flight = std::max(limits.max_body_bytes_in_flight, shared->max_body_bytes);
  limits.max_header_bytes = std::max<size_t>(limits.max_header_bytes, 1024);
  if (m.options.tls) {
    Result<std::unique_ptr<TlsReloader>> tls = TlsReloader::create(*m.options.tls, m.logger);
    if (!tls.isOk()) return tls.status();
    shared->tls = std::move(tls).value();
  }
  shared->ioc = std::make_shared<net::io_context>(std::max(1, m.options.io_threads));
  auto cannot = [&](const std::string& why) {
    return unavailable("cannot listen on " + url() + ": " + why +
                       " (is the port in use? choose another with " + m.options.flag + " HOST:PORT)");
  };
  try {
    beast::error_code ec;
    net::ip::address address = net::ip::make_address(m.host, ec);
    tcp::endpoint endpoint;
    if (!ec) {
      endpoint = tcp::endpoint(address, static_cast<unsigned short>(m.port));
    } else {
      tcp::resolver resolver(*shared->ioc);
      auto found = resolver.resolve(m.host, std::to_string(m.port), ec);
      if (ec || found.empty()) return cannot("cannot resolve \"" + m.host + "\": " + ec.message());
      endpoint = *found.begin();
    }
    m.acceptor = std::make_unique<tcp::acceptor>(net::make_strand(*shared->ioc));
    m.acceptor->open(endpoint.protocol());
    m.acceptor->set_option(net::socket_base::reuse_address(true));
    m.acceptor->bind(endpoint);
    m.acceptor->listen(net::socket_base::max_listen_connections);
    m.accept_retry = std::make_unique<net::steady_timer>(m.acceptor->get_executor());
  } catch (const boost::system::system_error& e) {
    m.acceptor.reset();
    return cannot(e.code().message());
  }
  shared->workers = std::make_shared<WorkerPool>(std::max(1, m.options.worker_threads));
  m.shared = shared;
  m.work.emplace(shared->ioc->get_executor());
  m.accept();
  for (int i = 0; i < std::max(1, m.options.io_threads); ++i) {
    m.io_threads.emplace_back([shared] {
      // An exception out of a completion handler must not end the thread (or the process).
      for (;;) {
        try {
          shared->ioc->run();
          return;
        } catch (const std::exception& e) {
          shared->internalError("http", e.what());
        } catch (...) {
          shared->internalError("http", "unknown exception");
        }
      }
    });
  }
  m.started = true;
  return Status::ok();
}

void ExtenderServer::stop() {
  if (!impl_ || !impl_->started) return;
  Impl& m = *impl_;
  m.started = false;
  const RequestDrain::Report report =
      m.shared->drain->drain(m.options.drain_grace, m.options.drain_running_limit);
  if (report.answered_by_drain > 0) {
    m.logger.warn("answered requests still pending at shutdown with an error",
                  {{"url", url()}, {"requests", std::to_string(report.answered_by_drain)}});
  }
  if (!report.handlers_returned) {
    m.logger.error("request handlers still running after the drain limit", {{"url", url()}});
  }
  // Stop accepting, then close every connection; the io threads end when nothing is left.
  std::promise<void> closed;
  net::post(m.acceptor->get_executor(), [&] {
    beast::error_code ignored;
    m.acceptor->close(ignored);
    m.accept_retry->cancel();
    closed.set_value();
  });
  closed.get_future().wait();
  for (const auto& s : m.shared->table.members()) s->close();
  m.work.reset();
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (m.shared->connections.load() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  m.shared->ioc->stop();
  for (std::thread& t : m.io_threads) t.join();
  m.io_threads.clear();
  // Completions still queued (of connections just closed) run here, so the sessions they hold
  // are released rather than kept alive by the io_context they keep alive.
  m.shared->ioc->restart();
  m.shared->ioc->poll();
  m.shared->workers->stop(report.handlers_returned);
  m.accept_retry.reset();
  m.acceptor.reset();
}

Result<std::pair<std::string, int>> parseListenAddress(const std::string& text, const std::string& flag) {
  size_t colon = text.rfind(':');
  auto bad = [&] {
    return invalidArgument(flag + " \"" + text + "\" must be HOST:PORT, e.g. 127.0.0.1:8888 or 0.0.0.0:8888");
  };
  if (colon == std::string::npos || colon == 0) return bad();
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    size_t used = 0;
    port = std::stoi(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1) return bad();
  } catch (...) {
    return bad();
  }
  if (port < 1 || port > 65535) return bad();
  return std::make_pair(host, port);
}

}  // namespace troupe::http
