#include "adapters/kube/watch/watcher.h"

#include <algorithm>

namespace troupe::kube {
namespace {

using Clock = std::chrono::steady_clock;

const Json* member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string stringMember(const Json& object, const char* key) {
  const Json* v = member(object, key);
  return v && v->is_string() ? v->get<std::string>() : std::string();
}

}  // namespace

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds cap,
                 std::function<double()> uniform)
    : initial_(initial), cap_(cap), uniform_(std::move(uniform)), step_(initial) {}

std::chrono::milliseconds Backoff::next() {
  const double u = std::clamp(uniform_ ? uniform_() : 0.5, 0.0, 1.0);
  const auto wait =
      std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(step_.count()) * (0.5 + 0.5 * u)));
  step_ = std::min(cap_, step_ * 2);
  return std::max(wait, std::chrono::milliseconds(1));
}

void Backoff::reset() { step_ = initial_; }

Watcher::Watcher(KubeTransport& api, WatchConfig config, WatchHandler& handler, adapters::Logger& logger,
                 std::function<double()> uniform, adapters::KubeMetrics* metrics,
                 adapters::InternalErrors internal_errors)
    : api_(api),
      config_(std::move(config)),
      handler_(handler),
      logger_(logger),
      uniform_(uniform),
      backoff_(config_.backoff_initial, config_.backoff_cap, uniform),
      metrics_(metrics),
      internal_errors_(std::move(internal_errors)) {}

template <class F>
void Watcher::deliver(const Json& object, const char* what, F&& call) {
  try {
    call();
  } catch (...) {
    std::string name;
    if (const Json* meta = member(object, "metadata")) name = stringMember(*meta, "name");
    adapters::reportInternalError(logger_, internal_errors_, adapters::kWhereWatch,
                                  std::string(what) + " " + config_.name + " " + name + " (passed over)");
  }
}

void Watcher::synced() {
  if (metrics_) metrics_->kubeSynced(config_.name);
}

void Watcher::restarted(const std::string& reason) {
  if (metrics_) metrics_->kubeWatchRestart(config_.name, reason);
}

void Watcher::relistNow(std::string reason) {
  std::shared_ptr<StopSignal> open;
  {
    std::lock_guard lock(abort_mu_);
    relist_reason_ = std::move(reason);
    open = stream_stop_;
  }
  // The same path as stopping Troupe: the request's cancellation closes the connection, so a
  // read blocked on a silent stream returns at once.
  if (open) open->stop();
}

std::optional<Clock::time_point> Watcher::watchingSince() const {
  std::lock_guard lock(abort_mu_);
  if (!stream_stop_) return std::nullopt;
  return stream_since_;
}

bool Watcher::takeRelistRequest() {
  std::string reason;
  {
    std::lock_guard lock(abort_mu_);
    reason.swap(relist_reason_);
  }
  if (reason.empty()) return false;
  relisting(reason);
  return true;
}

void Watcher::relisting(const std::string& reason) {
  ++stats_.requested;
  logger_.warn("watch restarted: listing again",
               {{"resource", config_.name}, {"reason", reason}, {"resourceVersion", resource_version_}});
  resource_version_.clear();
  restarted(reason);
}

std::string Watcher::query(bool watch, int timeout_seconds) const {
  std::string q;
  auto add = [&q](const std::string& key, const std::string& value) {
    q += (q.empty() ? "?" : "&") + key + "=" + urlEncode(value);
  };
  if (!config_.field_selector.empty()) add("fieldSelector", config_.field_selector);
  if (watch) {
    add("watch", "true");
    add("allowWatchBookmarks", "true");
    add("resourceVersion", resource_version_);
    add("timeoutSeconds", std::to_string(timeout_seconds));
  } else {
    add("limit", std::to_string(config_.page_size));
  }
  return config_.path + q;
}

bool Watcher::list(StopSignal& stop) {
  std::string cont;
  std::string rv;
  size_t count = 0;
  const auto start = Clock::now();
  if (stats_.lists > 0 && metrics_) metrics_->kubeRelist(config_.name);
  {
    // A list that begins now answers any relistNow() asked for before it.
    std::lock_guard lock(abort_mu_);
    relist_reason_.clear();
  }
  // Before the first request, so that whatever the handler learns from now on (from other
  // threads too) counts as part of this list, which is at least as new.
  handler_.beginList();
  for (;;) {
    if (stop.stopped()) return false;
    std::string path = query(false, 0);
    if (!cont.empty()) path += "&continue=" + urlEncode(cont);
    ApiReply reply = api_.request("GET", path);
    if (!reply.ok()) {
      if (reply.kind == ApiErrorKind::kGone && !cont.empty()) {
        // The continue token expired (the list took longer than etcd keeps its snapshot).
        logger_.info("list page expired; listing again", {{"resource", config_.name}});
        cont.clear();
        count = 0;
        if (metrics_) metrics_->kubeRelist(config_.name);
        handler_.beginList();
        continue;
      }
      ++stats_.failures;
      if (reply.kind == ApiErrorKind::kNotFound && !config_.missing_hint.empty()) {
        if (!missing_logged_) {
          logger_.warn("resource not installed; retrying with backoff",
                       {{"resource", config_.name}, {"path", config_.path}, {"fix", config_.missing_hint}});
        } else {
          logger_.debug("resource still not installed", {{"resource", config_.name}});
        }
        missing_logged_ = true;
        return false;
      }
      logger_.warn("list failed", {{"resource", config_.name}, {"error", reply.message}});
      return false;
    }
    Result<Json> doc = parseKubeJson(reply.body);
    std::string().swap(reply.body);
    if (!doc.isOk()) {
      ++stats_.failures;
      logger_.warn("list failed", {{"resource", config_.name}, {"error", doc.status().message()}});
      return false;
    }
    if (const Json* items = member(doc.value(), "items"); items && items->is_array()) {
      for (const Json& item : *items) deliver(item, "listed", [&] { handler_.listed(item); });
      count += items->size();
    }
    const Json* meta = member(doc.value(), "metadata");
    rv = meta ? stringMember(*meta, "resourceVersion") : std::string();
    cont = meta ? stringMember(*meta, "continue") : std::string();
    if (cont.empty()) break;
  }
  handler_.endList();
  missing_logged_ = false;
  resource_version_ = rv;
  ++stats_.lists;
  synced();
  logger_.info("listed",
               {{"resource", config_.name},
                {"objects", std::to_string(count)},
                {"resourceVersion", rv},
                {"seconds", std::to_string(std::chrono::duration<double>(Clock::now() - start).count())}});
  return true;
}

bool Watcher::watch(StopSignal& stop) {
  // The server ends the watch after timeoutSeconds (spread over +0-25% so watches of many
  // Troupes do not all reconnect at once); silence for longer than that means the connection
  // is dead.
  const double extra = 0.25 * (uniform_ ? std::clamp(uniform_(), 0.0, 1.0) : 0.0);
  const int timeout_seconds = static_cast<int>(config_.timeout_seconds * (1.0 + extra));
  const std::string path = query(true, timeout_seconds);
  bool gone = false;
  std::string problem;
  uint64_t delivered = 0;
  const auto start = Clock::now();
  auto on_line = [&](std::string& line) {
    Result<Json> ev = parseKubeJson(line);
    if (!ev.isOk()) {
      problem = ev.status().message();
      return false;
    }
    const std::string type = stringMember(ev.value(), "type");
    const Json* object = member(ev.value(), "object");
    if (!object || !object->is_object()) {
      problem = "watch event without an object";
      return false;
    }
    if (type == "ERROR") {
      const Json* code = member(*object, "code");
      if (code && code->is_number_integer() && code->get<int>() == 410) {
        gone = true;
      } else {
        problem = "watch error: " + stringMember(*object, "message");
      }
      return false;
    }
    ++delivered;
    synced();
    if (std::string rv = resourceVersionOf(*object); !rv.empty()) resource_version_ = rv;
    if (type == "BOOKMARK") {
      ++stats_.bookmarks;
      return true;
    }
    WatchEventType t;
    if (type == "ADDED") {
      t = WatchEventType::kAdded;
    } else if (type == "MODIFIED") {
      t = WatchEventType::kModified;
    } else if (type == "DELETED") {
      t = WatchEventType::kDeleted;
    } else {
      logger_.warn("unknown watch event type", {{"resource", config_.name}, {"type", type}});
      return true;
    }
    ++stats_.events;
    deliver(*object, "watch event", [&] { handler_.event(t, *object); });
    return !stop.stopped();
  };
  // The stream gets its own stop signal, so relistNow() can end it without stopping the
  // watcher; the caller's stop ends it too.
  auto stream_stop = std::make_shared<StopSignal>();
  bool asked_before = false;
  {
    std::lock_guard lock(abort_mu_);
    asked_before = !relist_reason_.empty();
    if (!asked_before) {
      stream_stop_ = stream_stop;
      stream_since_ = start;
    }
  }
  if (asked_before) return takeRelistRequest();  // while no stream was open: list now
  const uint64_t forward = stop.subscribe([stream_stop] { stream_stop->stop(); });
  auto closed = [&] {
    stop.unsubscribe(forward);
    std::lock_guard lock(abort_mu_);
    stream_stop_.reset();
  };
  ApiReply reply;
  try {
    reply = api_.stream(path, std::chrono::seconds(timeout_seconds + 30), on_line, *stream_stop);
  } catch (...) {
    closed();  // run() reports it; the stream is over either way
    throw;
  }
  closed();
  const bool lasted = Clock::now() - start >= std::chrono::seconds(1);
  if (stop.stopped()) return false;
  // Whatever the stream delivered before it was ended is applied; the list brings the rest.
  if (takeRelistRequest()) return true;
  if (reply.kind == ApiErrorKind::kCancelled) return false;
  if (gone || reply.kind == ApiErrorKind::kGone) {
    ++stats_.gone;
    logger_.info("watch resourceVersion expired (410 Gone); listing again",
                 {{"resource", config_.name}, {"resourceVersion", resource_version_}});
    resource_version_.clear();
    restarted("gone");
    return delivered > 0 || lasted;  // a 410 right away backs off before the relist
  }
  if (!reply.ok()) {
    ++stats_.failures;
    logger_.warn("watch failed", {{"resource", config_.name}, {"error", reply.message}});
    restarted("error");
    return false;
  }
  ++stats_.watches;
  if (!problem.empty()) {
    ++stats_.failures;
    logger_.warn("watch stopped", {{"resource", config_.name}, {"error", problem}});
    restarted("error");
    return false;
  }
  synced();  // the server ended the watch at its timeout: everything up to now was delivered
  restarted("closed");
  // A watch the server closes at once without events is retried after a backoff, not in a
  // tight loop.
  return delivered > 0 || lasted;
}

bool Watcher::step(StopSignal& stop) { return resource_version_.empty() ? list(stop) : watch(stop); }

void Watcher::run(StopSignal& stop) {
  while (!stop.stopped()) {
    bool stepped = false;
    if (!adapters::guarded(logger_, internal_errors_, adapters::kWhereWatch,
                           "list/watch step of " + config_.name, [&] { stepped = step(stop); })) {
      ++stats_.failures;
    }
    if (stepped) {
      backoff_.reset();
      continue;
    }
    if (stop.stopped()) break;
    const std::chrono::milliseconds wait = backoff_.next();
    logger_.debug("backing off", {{"resource", config_.name}, {"ms", std::to_string(wait.count())}});
    stop.sleepFor(wait);
  }
}

}  // namespace troupe::kube
