#include "adapters/http/extender_server.h"

#include <cpprest/http_listener.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>

#include "adapters/http/request_drain.h"
#include "adapters/http/wire.h"

namespace troupe::http {
namespace {

using Clock = std::chrono::steady_clock;

HttpResponse ok(std::string body) { return {200, std::move(body), "application/json"}; }
HttpResponse badRequest(const std::string& message) {
  return {400, encodeHttpError(message), "application/json"};
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

ExtenderHandler::ExtenderHandler(HandlerOptions options, sched::Scheduler& scheduler,
                                 metrics::Metrics& metrics, Logger& logger)
    : options_(std::move(options)), scheduler_(scheduler), metrics_(metrics), logger_(logger) {}

HttpResponse ExtenderHandler::handle(const std::string& method, const std::string& path,
                                     const std::string& body, Endpoints endpoints) {
  std::promise<HttpResponse> promise;
  std::future<HttpResponse> answer = promise.get_future();
  handleAsync(
      method, path, body, [&promise](HttpResponse r) { promise.set_value(std::move(r)); }, endpoints);
  return answer.get();
}

HttpResponse ExtenderHandler::shuttingDown(const std::string& raw_path, const std::string& why) {
  const std::string path = raw_path.substr(0, raw_path.find('?'));
  const std::string message = "troupe is shutting down (" + why + "); kube-scheduler retries the pod";
  const std::string verb = path.substr(path.rfind('/') + 1);
  if (verb == "bind") return ok(encodeBindingResult(message));
  if (verb == "filter") return ok(encodeFilterError(message));
  return {503, encodeHttpError(message), "application/json"};
}

void ExtenderHandler::handleAsync(const std::string& method, const std::string& raw_path,
                                  const std::string& body, Reply reply, Endpoints endpoints) {
  std::string path = raw_path.substr(0, raw_path.find('?'));
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const auto start = Clock::now();
  std::string verb;
  HttpResponse early = route(method, path, body, endpoints, &verb);
  if (verb != "bind" || early.status != 0) {
    if (early.status == 0)
      early = HttpResponse{500, encodeHttpError("internal error: unrouted request"), "application/json"};
    reply(std::move(early));
    return;
  }
  // Bind answers later: when the pod's gang is complete, or at once for a pod on its own.
  bind(body, [this, start, reply = std::move(reply)](HttpResponse r) {
    const bool failed = r.body.find("\"Error\":\"\"") == std::string::npos;
    metrics_.observeRequest("bind",
                            r.status == 400 ? "bad_request"
                            : failed        ? "error"
                                            : "ok",
                            secondsSince(start));
    reply(std::move(r));
  });
}

// Everything but bind is answered here; for bind, *verb is set and status 0 means "go on".
HttpResponse ExtenderHandler::route(const std::string& method, const std::string& path,
                                    const std::string& body, Endpoints endpoints, std::string* verb_out) {
  try {
    const bool probe = path == "/healthz" || path == "/readyz" || path == "/metrics";
    if (endpoints == Endpoints::kProbesOnly && !(method == "GET" && probe)) {
      return {404,
              encodeHttpError("no such endpoint " + method + " " + path +
                              " on this port: it serves only GET /healthz, /readyz and /metrics "
                              "(--metrics-listen); the extender verbs are on --listen"),
              "application/json"};
    }
    if (method == "GET") {
      if (path == "/healthz") return {200, "ok\n", "text/plain"};
      if (path == "/readyz") {
        return ready() ? HttpResponse{200, "ok\n", "text/plain"}
                       : HttpResponse{503, "not ready: cluster state not synced yet\n", "text/plain"};
      }
      if (path == "/metrics") {
        metrics_.refreshCluster(scheduler_.summary());
        metrics_.observeGangEvents(scheduler_.drainGangEvents());
        return {200, metrics_.serialize(), "text/plain; version=0.0.4"};
      }
    }
    // Verbs are matched on the last path segment so a urlPrefix with a path works too.
    const std::string verb = path.substr(path.rfind('/') + 1);
    const bool is_verb = verb == "filter" || verb == "prioritize" || verb == "bind" || verb == "preempt";
    if (!is_verb) {
      return {404,
              encodeHttpError("no such endpoint " + method + " " + path +
                              "; Troupe serves POST /filter, /prioritize, /bind, /preempt and "
                              "GET /healthz, /readyz, /metrics"),
              "application/json"};
    }
    if (method != "POST") {
      return {405, encodeHttpError(verb + " takes POST with a JSON body, not " + method), "application/json"};
    }
    if (body.size() > options_.max_body_bytes) {
      metrics_.observeRequest(verb, "bad_request", 0);
      return {413,
              encodeHttpError("request body of " + std::to_string(body.size()) +
                              " bytes is over the limit of " + std::to_string(options_.max_body_bytes) +
                              "; raise maxBodyBytes in Troupe's config or use nodeCacheCapable: true"),
              "application/json"};
    }
    if (!options_.record_dir.empty()) record(verb, body);
    if (!ready()) {
      // Until the first sync Troupe does not know which GPUs are taken; answering would risk
      // handing them out twice. kube-scheduler retries the pod after its backoff.
      const std::string why = "troupe: not ready: the cluster state is not synced yet; retry shortly";
      metrics_.observeRequest(verb, "error", 0);
      *verb_out = verb;
      if (verb == "filter") return ok(encodeFilterError(why));
      if (verb == "bind") return ok(encodeBindingResult(why));
      return {503, encodeHttpError(why), "application/json"};  // prioritize and preempt have no Error field
    }
    if (verb == "bind") {
      *verb_out = verb;
      return {0, "", ""};
    }
    const auto start = Clock::now();
    HttpResponse r = verb == "filter"       ? filter(body)
                     : verb == "prioritize" ? prioritize(body)
                                            : preempt(body);
    std::string outcome = r.status == 400 ? "bad_request" : "ok";
    // Only a filter answer has an Error field, always last; reading its end, not searching the
    // whole answer (megabytes of node objects in full-node mode), tells whether it is set.
    if (r.status == 200 && verb == "filter" && !r.body.ends_with(",\"Error\":\"\"}")) outcome = "error";
    metrics_.observeRequest(verb, outcome, secondsSince(start));
    if (r.status == 400) logger_.warn("bad request", {{"verb", verb}, {"error", r.body}});
    *verb_out = verb;
    return r;
  } catch (const std::exception& e) {
    // Last resort: a bug must not take the scheduler's extender down.
    logger_.error("internal error", {{"path", path}, {"error", e.what()}});
    return {500, encodeHttpError(std::string("internal error: ") + e.what()), "application/json"};
  }
}

HttpResponse ExtenderHandler::filter(const std::string& body) {
  Result<ExtenderArgs> args = decodeExtenderArgs(body);
  if (!args.isOk()) return badRequest(args.status().message());
  sched::FilterResult result;
  if (args.value().node_cache_mode) {
    result = scheduler_.filter(args.value().pod, args.value().node_names);
  } else {
    std::vector<std::string> errors;
    result = scheduler_.filterNodes(args.value().pod, args.value().nodes, &errors);
    for (const std::string& e : errors) logger_.warn("node facts rejected", {{"error", e}});
  }
  metrics_.countRejections(result.categories);
  if (logger_.enabled(LogLevel::kDebug)) {
    logger_.debug("filter", {{"pod", args.value().pod.key()},
                             {"candidates", std::to_string(args.value().node_names.size())},
                             {"passed", std::to_string(result.passed.size())},
                             {"failed", std::to_string(result.failed.size())},
                             {"unresolvable", std::to_string(result.unresolvable.size())}});
  }
  return ok(encodeFilterResult(args.value(), result));
}

HttpResponse ExtenderHandler::prioritize(const std::string& body) {
  Result<ExtenderArgs> args = decodeExtenderArgs(body);
  if (!args.isOk()) return badRequest(args.status().message());
  // Learn mode only: otherwise the request's node facts are ignored (Scheduler::learnNodes).
  if (!args.value().node_cache_mode) (void)scheduler_.learnNodes(args.value().nodes, nullptr);
  return ok(encodeHostPriorityList(scheduler_.prioritize(args.value().pod, args.value().node_names)));
}

void ExtenderHandler::bind(const std::string& body, Reply reply) {
  Result<BindingArgs> args = decodeBindingArgs(body);
  if (!args.isOk()) {
    reply(badRequest(args.status().message()));
    return;
  }
  const BindingArgs b = args.value();
  if (binder_) {
    binder_->bindAsync(b, [this, b, reply = std::move(reply)](Result<model::Allocation> a) {
      const std::string pod = b.pod_namespace + "/" + b.pod_name;
      if (!a.isOk()) {
        logger_.warn("bind failed", {{"pod", pod}, {"node", b.node}, {"error", a.status().message()}});
        reply(ok(encodeBindingResult(a.status().message())));
        return;
      }
      std::string gpus;
      for (int g : a.value().gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
      logger_.info("bound", {{"pod", pod}, {"node", b.node}, {"gpus", gpus}, {"gang", a.value().gang}});
      metrics_.observePlacement(a.value().topology_quality, a.value().topology_quality >= 1.0 - 1e-9);
      reply(ok(encodeBindingResult("")));
    });
    return;
  }
  scheduler_.bind(
      b.pod_uid, b.pod_namespace, b.pod_name, b.node,
      [this, b, reply = std::move(reply)](Result<model::Allocation> a) {
        const std::string pod = b.pod_namespace + "/" + b.pod_name;
        if (!a.isOk()) {
          logger_.warn("bind refused", {{"pod", pod}, {"node", b.node}, {"error", a.status().message()}});
          reply(ok(encodeBindingResult(a.status().message())));
          return;
        }
        if (post_bind_) {
          if (Status st = post_bind_(b, a.value()); !st.isOk()) {
            scheduler_.release(b.pod_uid);  // no GPU stays held for a pod that did not bind
            logger_.warn("bind failed", {{"pod", pod}, {"node", b.node}, {"error", st.message()}});
            reply(ok(encodeBindingResult(st.message())));
            return;
          }
        }
        std::string gpus;
        for (int g : a.value().gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
        logger_.info("bound", {{"pod", pod}, {"node", b.node}, {"gpus", gpus}, {"gang", a.value().gang}});
        metrics_.observePlacement(a.value().topology_quality, a.value().topology_quality >= 1.0 - 1e-9);
        reply(ok(encodeBindingResult("")));
      });
}

HttpResponse ExtenderHandler::preempt(const std::string& body) {
  Result<PreemptionArgs> args = decodePreemptionArgs(body);
  if (!args.isOk()) return badRequest(args.status().message());
  auto kept = scheduler_.preempt(args.value().pod, args.value().victims);
  return ok(encodePreemptionResult(kept, args.value().pdb_violations));
}

void ExtenderHandler::record(const std::string& verb, const std::string& body) {
  std::error_code ec;
  std::filesystem::create_directories(options_.record_dir, ec);
  char name[64];
  std::snprintf(name, sizeof name, "%s-%06llu.json", verb.c_str(),
                static_cast<unsigned long long>(++record_seq_));
  std::ofstream out(options_.record_dir + "/" + name, std::ios::binary);
  out << body;
  if (!out) logger_.warn("could not record request", {{"dir", options_.record_dir}});
}

// ---------------------------------------------------------------------------------------------

struct ExtenderServer::Impl {
  std::string host;
  int port;
  ExtenderHandler& handler;
  Logger& logger;
  ServerOptions options;
  std::unique_ptr<web::http::experimental::listener::http_listener> listener;
  // Shared with the listener's callbacks, which may run until the listener is closed.
  std::shared_ptr<RequestDrain> drain = std::make_shared<RequestDrain>();
};

ExtenderServer::ExtenderServer(std::string host, int port, ExtenderHandler& handler, Logger& logger,
                               ServerOptions options)
    : impl_(std::make_unique<Impl>(Impl{std::move(host), port, handler, logger, options, nullptr})) {}

ExtenderServer::~ExtenderServer() { stop(); }

std::string ExtenderServer::url() const {
  return "http://" + impl_->host + ":" + std::to_string(impl_->port);
}

int ExtenderServer::inFlight() const { return impl_->drain->open(); }

Status ExtenderServer::start() {
  using web::http::http_request;
  using web::http::status_code;
  try {
    impl_->listener = std::make_unique<web::http::experimental::listener::http_listener>(url());
    // The callbacks reach the handler only through an admitted call: after stop() began they
    // answer without touching it.
    ExtenderHandler* handler = &impl_->handler;
    std::shared_ptr<RequestDrain> drain = impl_->drain;
    const Endpoints endpoints = impl_->options.endpoints;
    impl_->listener->support([handler, drain, endpoints](http_request request) {
      auto send = [request](const HttpResponse& r, std::function<void()> sent) mutable {
        web::http::http_response response(static_cast<status_code>(r.status));
        response.set_body(r.body, r.content_type);
        request.reply(response).then([sent = std::move(sent)](pplx::task<void> t) {
          try {
            t.get();
          } catch (...) {  // the client went away; nothing to do
          }
          if (sent) sent();
        });
      };
      const std::string method = request.method();
      const std::string path = request.relative_uri().to_string();
      std::optional<RequestDrain::Admission> admitted =
          drain->admit(send, ExtenderHandler::shuttingDown(path, "the request was still pending"));
      if (!admitted) {
        send(ExtenderHandler::shuttingDown(path, "no new requests are taken"), nullptr);
        return;
      }
      std::shared_ptr<RequestDrain::Call> call = admitted->call;
      std::shared_ptr<RequestDrain::Running> running = admitted->running;
      Reply reply = [call](HttpResponse r) { call->answer(r); };
      const size_t limit = handler->maxBodyBytes();
      if (request.headers().content_length() > limit) {
        handler->handleAsync(method, path, std::string(limit + 1, ' '), reply, endpoints);
        running->release();
        return;
      }
      request.extract_vector().then(
          [handler, method, path, reply, running, endpoints](pplx::task<std::vector<unsigned char>> t) {
            std::string body;
            try {
              std::vector<unsigned char> bytes = t.get();
              body.assign(bytes.begin(), bytes.end());
            } catch (const std::exception& e) {
              reply(HttpResponse{400,
                                 encodeHttpError(std::string("could not read the request body: ") + e.what()),
                                 "application/json"});
              running->release();
              return;
            }
            handler->handleAsync(method, path, body, reply, endpoints);
            running->release();
          });
    });
    impl_->listener->open().wait();
  } catch (const std::exception& e) {
    impl_->listener.reset();
    return unavailable("cannot listen on " + url() + ": " + e.what() +
                       " (is the port in use? choose another with " + impl_->options.flag + " HOST:PORT)");
  }
  return Status::ok();
}

void ExtenderServer::stop() {
  if (!impl_ || !impl_->listener) return;
  const RequestDrain::Report report =
      impl_->drain->drain(impl_->options.drain_grace, impl_->options.drain_running_limit);
  if (report.answered_by_drain > 0) {
    impl_->logger.warn("answered requests still pending at shutdown with an error",
                       {{"url", url()}, {"requests", std::to_string(report.answered_by_drain)}});
  }
  if (!report.handlers_returned) {
    impl_->logger.error("request handlers still running after the drain limit", {{"url", url()}});
  }
  try {
    impl_->listener->close().wait();
  } catch (...) {
  }
  impl_->listener.reset();
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
