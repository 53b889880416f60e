#include "adapters/http/extender_server.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>

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

const char* ExtenderHandler::outcomeLabel(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk: return "ok";
    case Outcome::kError: return "error";
    case Outcome::kBadRequest: return "bad_request";
  }
  return "error";
}

ExtenderHandler::ExtenderHandler(HandlerOptions options, sched::Scheduler& scheduler,
                                 adapters::ExtenderMetrics& metrics, adapters::Logger& logger)
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

HttpResponse ExtenderHandler::tooLarge(const std::string& raw_path, std::optional<uint64_t> declared) {
  const std::string path = raw_path.substr(0, raw_path.find('?'));
  const std::string verb = path.substr(path.rfind('/') + 1);
  if (verb == "filter" || verb == "prioritize" || verb == "bind" || verb == "preempt") {
    metrics_.observeRequest(verb, outcomeLabel(Outcome::kBadRequest), 0);
  }
  const std::string size = declared ? "of " + std::to_string(*declared) + " bytes " : "";
  return {413,
          encodeHttpError("request body " + size + "is over the limit of " +
                          std::to_string(options_.max_body_bytes) +
                          " bytes; raise maxBodyBytes in Troupe's config or use nodeCacheCapable: true"),
          "application/json"};
}

HttpResponse ExtenderHandler::internalError(std::string_view where, const std::string& path,
                                            const char* what) {
  logger_.error("internal error", {{"where", std::string(where)}, {"path", path}, {"error", what}});
  options_.internal_errors.count(std::string(where));  // never throws
  return {500, encodeHttpError(std::string("internal error: ") + what), "application/json"};
}

void ExtenderHandler::handleAsync(const std::string& method, const std::string& raw_path,
                                  const std::string& body, Reply raw_reply, Endpoints endpoints) {
  // Exactly one answer, whatever throws where: a 500 sent after a real answer is dropped.
  auto replied = std::make_shared<std::atomic<bool>>(false);
  Reply reply = [replied, raw_reply = std::move(raw_reply)](HttpResponse r) {
    if (!replied->exchange(true)) raw_reply(std::move(r));
  };
  std::string path = raw_path.substr(0, raw_path.find('?'));
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  try {
    const auto start = Clock::now();
    Routed routed = route(method, path, body, endpoints);
    if (HttpResponse* answer = std::get_if<HttpResponse>(&routed)) {
      reply(std::move(*answer));
      return;
    }
    bindAsync(body, start, reply);
  } catch (const std::exception& e) {
    reply(internalError("http", path, e.what()));
  } catch (...) {
    reply(internalError("http", path, "unknown exception"));
  }
}

// Bind answers later: when the pod's gang is complete, or at once for a pod on its own. The
// answer comes on a scheduler or binder thread, where an exception would end the process
// (review C3), so the continuation catches too.
void ExtenderHandler::bindAsync(const std::string& body, Clock::time_point start, Reply reply) {
  bind(body, [this, start, reply](VerbAnswer a) {
    try {
      metrics_.observeRequest("bind", outcomeLabel(a.outcome), secondsSince(start));
      reply(std::move(a.response));
    } catch (const std::exception& e) {
      reply(internalError("http", "/bind", e.what()));
    } catch (...) {
      reply(internalError("http", "/bind", "unknown exception"));
    }
  });
}

// Everything but a bind that may go ahead is answered here.
ExtenderHandler::Routed ExtenderHandler::route(const std::string& method, const std::string& path,
                                               const std::string& body, Endpoints endpoints) {
  try {
    const bool probe = path == "/healthz" || path == "/readyz" || path == "/metrics";
    if (endpoints == Endpoints::kProbesOnly && !(method == "GET" && probe)) {
      return HttpResponse{404,
                          encodeHttpError("no such endpoint " + method + " " + path +
                                          " on this port: it serves only GET /healthz, /readyz and /metrics "
                                          "(--metrics-listen); the extender verbs are on --listen"),
                          "application/json"};
    }
    if (method == "GET") {
      if (path == "/healthz") return HttpResponse{200, "ok\n", "text/plain"};
      if (path == "/readyz") {
        return ready() ? HttpResponse{200, "ok\n", "text/plain"}
                       : HttpResponse{503, "not ready: cluster state not synced yet\n", "text/plain"};
      }
      if (path == "/metrics") {
        metrics_.refreshCluster(scheduler_.summary(metrics_.maxNodeRows()));
        metrics_.refreshQueues(scheduler_.queueStatuses());
        metrics_.observeGangEvents(scheduler_.drainGangEvents());
        return HttpResponse{200, metrics_.serialize(), "text/plain; version=0.0.4"};
      }
    }
    // Verbs are matched on the last path segment so a urlPrefix with a path works too.
    const std::string verb = path.substr(path.rfind('/') + 1);
    const bool is_verb = verb == "filter" || verb == "prioritize" || verb == "bind" || verb == "preempt";
    if (!is_verb) {
      return HttpResponse{404,
                          encodeHttpError("no such endpoint " + method + " " + path +
                                          "; Troupe serves POST /filter, /prioritize, /bind, /preempt and "
                                          "GET /healthz, /readyz, /metrics"),
                          "application/json"};
    }
    if (method != "POST") {
      return HttpResponse{405, encodeHttpError(verb + " takes POST with a JSON body, not " + method),
                          "application/json"};
    }
    if (body.size() > options_.max_body_bytes) return tooLarge(path, body.size());
    if (!options_.record_dir.empty()) record(verb, body);
    if (!ready()) {
      // Until the first sync Troupe does not know which GPUs are taken; answering would risk
      // handing them out twice. kube-scheduler retries the pod after its backoff.
      const std::string why = "troupe: not ready: the cluster state is not synced yet; retry shortly";
      metrics_.observeRequest(verb, outcomeLabel(Outcome::kError), 0);
      if (verb == "filter") return ok(encodeFilterError(why));
      if (verb == "bind") return ok(encodeBindingResult(why));
      return HttpResponse{503, encodeHttpError(why),
                          "application/json"};  // prioritize and preempt have no Error field
    }
    if (verb == "bind") return BindLater{};
    const auto start = Clock::now();
    VerbAnswer a = verb == "filter" ? filter(body) : verb == "prioritize" ? prioritize(body) : preempt(body);
    metrics_.observeRequest(verb, outcomeLabel(a.outcome), secondsSince(start));
    if (a.outcome == Outcome::kBadRequest)
      logger_.warn("bad request", {{"verb", verb}, {"error", a.response.body}});
    return std::move(a.response);
  } catch (const std::exception& e) {
    // Last resort: a bug must not take the scheduler's extender down.
    return internalError("http", path, e.what());
  }
}

void ExtenderHandler::fillClaimGpus(sched::PodFacts& pod) const {
  if (claim_gpus_ && !pod.resource_claims.empty()) pod.claim_gpus = claim_gpus_(pod);
}

ExtenderHandler::VerbAnswer ExtenderHandler::filter(const std::string& body) {
  Result<ExtenderArgs> args = decodeExtenderArgs(body);
  if (!args.isOk()) return {badRequest(args.status().message()), Outcome::kBadRequest};
  fillClaimGpus(args.value().pod);
  const sched::PodGroupInfo pod_group = sched::podGroupFor(args.value().pod, pod_groups_, native_groups_);
  sched::FilterResult result;
  if (args.value().node_cache_mode) {
    result = scheduler_.filter(args.value().pod, args.value().node_names, pod_group);
  } else {
    std::vector<std::string> errors;
    result = scheduler_.filterNodes(args.value().pod, args.value().nodes, &errors, pod_group);
    for (const std::string& e : errors) logger_.warn("node facts rejected", {{"error", e}});
  }
  metrics_.countRejections(result.categories);
  if (logger_.enabled(adapters::LogLevel::kDebug)) {
    logger_.debug("filter", {{"pod", args.value().pod.key()},
                             {"candidates", std::to_string(args.value().node_names.size())},
                             {"passed", std::to_string(result.passed.size())},
                             {"failed", std::to_string(result.failed.size())},
                             {"unresolvable", std::to_string(result.unresolvable.size())}});
  }
  return {ok(encodeFilterResult(args.value(), result)), Outcome::kOk};
}

ExtenderHandler::VerbAnswer ExtenderHandler::prioritize(const std::string& body) {
  Result<ExtenderArgs> args = decodeExtenderArgs(body);
  if (!args.isOk()) return {badRequest(args.status().message()), Outcome::kBadRequest};
  fillClaimGpus(args.value().pod);
  // Learn mode only: otherwise the request's node facts are ignored (Scheduler::learnNodes).
  if (!args.value().node_cache_mode) (void)scheduler_.learnNodes(args.value().nodes, nullptr);
  return {ok(encodeHostPriorityList(
              extenderScores(scheduler_.prioritize(args.value().pod, args.value().node_names)))),
          Outcome::kOk};
}

void ExtenderHandler::bind(const std::string& body, VerbReply reply) {
  Result<sched::BindRequest> args = decodeBindingArgs(body);
  if (!args.isOk()) {
    reply({badRequest(args.status().message()), Outcome::kBadRequest});
    return;
  }
  const sched::BindRequest b = args.value();
  // Runs on the thread that finishes the bind; an exception there is answered 500.
  auto answer = [this, b, reply](const Result<model::Allocation>& a) {
    try {
      const std::string pod = b.pod_namespace + "/" + b.pod_name;
      if (!a.isOk()) {
        logger_.warn(binder_ ? "bind failed" : "bind refused",
                     {{"pod", pod}, {"node", b.node}, {"error", a.status().message()}});
        reply({ok(encodeBindingResult(a.status().message())), Outcome::kError});
        return;
      }
      std::string gpus;
      for (int g : a.value().gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
      if (gpus.empty() && a.value().unknown_gpus > 0)
        gpus = std::to_string(a.value().unknown_gpus) + " chosen by DRA";
      logger_.info("bound", {{"pod", pod}, {"node", b.node}, {"gpus", gpus}, {"gang", a.value().gang}});
      metrics_.observePlacement(a.value().topology_quality, a.value().topology_quality >= 1.0 - 1e-9);
      reply({ok(encodeBindingResult("")), Outcome::kOk});
    } catch (const std::exception& e) {
      reply({internalError("http", "/bind", e.what()), Outcome::kError});
    } catch (...) {
      reply({internalError("http", "/bind", "unknown exception"), Outcome::kError});
    }
  };
  if (binder_) {
    binder_->bindAsync(b, answer);
    return;
  }
  scheduler_.bind(b.pod_uid, b.pod_namespace, b.pod_name, b.node, answer);
}

ExtenderHandler::VerbAnswer ExtenderHandler::preempt(const std::string& body) {
  Result<PreemptionArgs> args = decodePreemptionArgs(body);
  if (!args.isOk()) return {badRequest(args.status().message()), Outcome::kBadRequest};
  auto kept = scheduler_.preempt(args.value().pod, args.value().victims);
  return {ok(encodePreemptionResult(kept, args.value().pdb_violations)), Outcome::kOk};
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

}  // namespace troupe::http
