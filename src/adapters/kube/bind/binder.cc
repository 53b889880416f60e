#include "adapters/kube/bind/binder.h"

#include <algorithm>
#include <cstdio>
#include <future>
#include <nlohmann/json.hpp>

#include "troupe/model/pod_contract.h"

namespace troupe::kube {
namespace {

std::string podPath(const std::string& ns, const std::string& name) {
  return "/api/v1/namespaces/" + urlEncode(ns) + "/pods/" + urlEncode(name);
}

std::string assignmentMessage(const model::Allocation& a) {
  std::string m;
  if (a.gpus.empty() && a.unknown_gpus > 0) {
    // A DRA-served node: kube-scheduler's DynamicResources plugin picked the devices already.
    m = "DRA chooses the devices on node " + a.node + "; Troupe checked that " +
        std::to_string(a.unknown_gpus) + " GPU" + (a.unknown_gpus == 1 ? " is" : "s are") +
        " free there and counts them as held";
  } else if (a.gpus.size() == 1 && a.milli_per_gpu < model::kMilliPerGpu) {
    m = "Troupe assigned a " + std::to_string(a.milli_per_gpu) + "/1000 share of GPU " + formatGpus(a.gpus) +
        " on node " + a.node + " (shared GPUs are packed before whole ones are opened)";
  } else {
    m = "Troupe assigned GPU" + std::string(a.gpus.size() == 1 ? " " : "s ") + formatGpus(a.gpus) +
        " on node " + a.node + ": ";
    if (a.gpus.size() <= 1) {
      m += "the node was ranked by how full it is (partly used nodes first, so whole nodes stay free)";
    } else if (a.topology_quality >= 1.0 - 1e-9) {
      m += "the best-connected set of " + std::to_string(a.gpus.size()) +
           " GPUs that node can offer; the node was ranked by fill level and GPU connectivity";
    } else {
      char q[16];
      std::snprintf(q, sizeof q, "%.2f", a.topology_quality);
      m += "the best-connected free set there, at " + std::string(q) +
           " of the bandwidth of the node's best " + std::to_string(a.gpus.size()) +
           "-GPU set (the better-connected GPUs are taken)";
    }
  }
  if (!a.gang.empty()) m += "; gang " + a.gang;
  return m;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Binder::Binder(KubeTransport& api, sched::Scheduler& scheduler, ClusterSync& sync, EventRecorder* events,
               adapters::Logger& logger, BinderOptions options)
    : api_(api), scheduler_(scheduler), sync_(sync), events_(events), logger_(logger), options_(options) {
  sync_.onPodWatched([this](const std::string& uid) { podWatched(uid); });
}

Binder::~Binder() {
  stop();
  sync_.onPodWatched(nullptr);
}

void Binder::start() {
  std::lock_guard lock(queue_mu_);
  if (!workers_.empty() || stopping_) return;
  for (int i = 0; i < std::max(1, options_.workers); ++i) workers_.emplace_back([this] { workerLoop(); });
}

void Binder::stop() {
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(queue_mu_);
    stopping_ = true;
    workers.swap(workers_);
  }
  queue_cv_.notify_all();
  for (std::thread& t : workers) t.join();
  // Whatever arrived while the workers were finishing.
  for (;;) {
    std::function<void()> task;
    {
      std::lock_guard lock(queue_mu_);
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    adapters::guarded(logger_, options_.internal_errors, adapters::kWhereBinder, "bind task (after stop)",
                      task);
  }
}

void Binder::enqueue(std::function<void()> task) {
  {
    std::lock_guard lock(queue_mu_);
    if (!workers_.empty()) {
      queue_.push_back(std::move(task));
      queue_cv_.notify_one();
      return;
    }
  }
  task();  // not started (tests) or stopped: run here
}

void Binder::workerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(queue_mu_);
      queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    // A throwing task must not end the worker (std::terminate): it is logged and counted.
    adapters::guarded(logger_, options_.internal_errors, adapters::kWhereBinder, "bind task", task);
  }
}

void Binder::bindAsync(const sched::BindRequest& args, Done done) {
  auto job = std::make_shared<Job>();
  job->args = args;
  job->done = std::move(done);
  job->start = std::chrono::steady_clock::now();
  enqueue([this, job] { begin(job); });
}

Result<model::Allocation> Binder::bind(const sched::BindRequest& args) {
  std::promise<Result<model::Allocation>> promise;
  auto answer = promise.get_future();
  bindAsync(args, [&promise](Result<model::Allocation> r) { promise.set_value(std::move(r)); });
  return answer.get();
}

bool Binder::acquire(const JobPtr& job) {
  std::lock_guard lock(pods_mu_);
  auto it = busy_.find(job->args.pod_uid);
  if (it != busy_.end()) {
    it->second.push_back(job);  // a second bind of the same pod waits for the first
    return false;
  }
  busy_.emplace(job->args.pod_uid, std::deque<JobPtr>{});
  return true;
}

void Binder::releasePod(const std::string& uid) { scheduler_.release(uid); }

void Binder::markSending(const JobPtr& job) {
  std::lock_guard lock(pods_mu_);
  sent_[job->args.pod_uid] =
      Sent{Target{job->args.pod_namespace, job->args.pod_name, job->args.node}, Sent::State::kSending, {}};
}

void Binder::markCreated(const std::string& uid) {
  std::lock_guard lock(pods_mu_);
  auto it = sent_.find(uid);
  if (it == sent_.end()) return;  // the watch showed it before the answer came
  it->second.state = Sent::State::kCreated;
  it->second.created = std::chrono::steady_clock::now();
}

void Binder::markUnconfirmed(const JobPtr& job) {
  std::lock_guard lock(pods_mu_);
  sent_[job->args.pod_uid] = Sent{
      Target{job->args.pod_namespace, job->args.pod_name, job->args.node}, Sent::State::kUnconfirmed, {}};
}

void Binder::abandon(const std::string& uid) {
  releasePod(uid);
  forgetSent(uid);
}

void Binder::forgetSent(const std::string& uid) {
  std::lock_guard lock(pods_mu_);
  sent_.erase(uid);
}

void Binder::podWatched(const std::string& uid) {
  // Bound or deleted as the watch shows it: ClusterSync has applied that truth, which also
  // settles an unconfirmed binding (the reservation is replaced or released).
  std::lock_guard lock(pods_mu_);
  if (!sent_.empty()) sent_.erase(uid);
}

size_t Binder::unconfirmedCount() const {
  std::lock_guard lock(pods_mu_);
  return static_cast<size_t>(std::count_if(
      sent_.begin(), sent_.end(), [](const auto& e) { return e.second.state == Sent::State::kUnconfirmed; }));
}

size_t Binder::unechoedCount() const {
  std::lock_guard lock(pods_mu_);
  return static_cast<size_t>(std::count_if(
      sent_.begin(), sent_.end(), [](const auto& e) { return e.second.state != Sent::State::kUnconfirmed; }));
}

ApiReply Binder::getPod(const std::string& ns, const std::string& name) {
  return api_.request("GET", podPath(ns, name));
}

void Binder::begin(const JobPtr& job) {
  if (acquire(job)) prepare(job);
}

bool Binder::watchedUnbound(const JobPtr& job) {
  const sched::BindRequest& b = job->args;
  std::optional<ClusterSync::PendingPod> p = sync_.pendingPod(b.pod_uid);
  if (!p || p->ns != b.pod_namespace || p->name != b.pod_name) return false;
  // Another profile's pod takes the reading path, which refuses it with the reason.
  if (std::find(options_.scheduler_names.begin(), options_.scheduler_names.end(), p->scheduler_name) ==
      options_.scheduler_names.end()) {
    return false;
  }
  // A Binding of it may exist that the watch has not shown yet: read the pod.
  std::lock_guard lock(pods_mu_);
  return sent_.count(b.pod_uid) == 0;
}

void Binder::prepare(const JobPtr& job) {
  const sched::BindRequest& b = job->args;
  const std::string key = b.pod_namespace + "/" + b.pod_name;
  if (watchedUnbound(job)) {
    reserveUnbound(job);
    return;
  }
  ApiReply r = getPod(b.pod_namespace, b.pod_name);
  if (!r.ok()) {
    if (r.kind == ApiErrorKind::kNotFound) {
      abandon(b.pod_uid);
      finish(job, notFound("pod " + key + " no longer exists; nothing was bound"));
      return;
    }
    finish(job, toStatus(r, "read pod " + key + " before binding it"));
    return;
  }
  Result<Json> doc = parseKubeJson(r.body);
  Result<PodView> pod = doc.isOk() ? decodePod(doc.value()) : Result<PodView>(doc.status());
  if (!pod.isOk()) {
    finish(job, invalidArgument("cannot read pod " + key + ": " + pod.status().message()));
    return;
  }
  job->pod = std::move(pod).value();
  const PodView& p = job->pod;
  if (p.facts.uid != b.pod_uid) {
    finish(job,
           failedPrecondition("pod " + key + " is now a different pod (uid " + p.facts.uid +
                              ", kube-scheduler asked to bind uid " + b.pod_uid + "); nothing was bound"));
    return;
  }
  if (std::find(options_.scheduler_names.begin(), options_.scheduler_names.end(), p.scheduler_name) ==
      options_.scheduler_names.end()) {
    finish(job,
           failedPrecondition("pod " + key + " has spec.schedulerName \"" + p.scheduler_name +
                              "\", not one of Troupe's profiles (" + joined(options_.scheduler_names) +
                              "; --scheduler-name, schedulerNames in --config): Troupe binds only the pods "
                              "of its own profiles; nothing was bound"));
    return;
  }
  if (p.bound()) {
    if (p.facts.node_name != b.node) {
      finish(job, failedPrecondition("pod " + key + " is already bound to node " + p.facts.node_name +
                                     ", not " + b.node));
      return;
    }
    // Already bound here: a retry whose first answer was lost. Its GPUs are what the API says.
    sync_.applyPod(p);
    forgetSent(b.pod_uid);
    std::optional<model::Allocation> held = scheduler_.allocationOf(b.pod_uid);
    model::Allocation a;
    if (held) {
      a = *held;
    } else {
      a.pod_uid = b.pod_uid;
      a.pod_key = key;
      a.node = b.node;
    }
    logger_.info("bind retried: pod already bound",
                 {{"pod", key}, {"node", b.node}, {"gpus", formatGpus(a.gpus)}});
    finish(job, a);
    return;
  }
  reserveUnbound(job);
}

void Binder::reserveUnbound(const JobPtr& job) {
  const sched::BindRequest& b = job->args;
  // Unbound, as read or watched: a reservation it holds on another node is a leftover of an
  // earlier failed attempt; one on this node is reused.
  if (std::optional<model::Allocation> held = scheduler_.allocationOf(b.pod_uid);
      held && held->node != b.node) {
    releasePod(b.pod_uid);
  }
  forgetSent(b.pod_uid);
  reserve(job);
}

void Binder::reserve(const JobPtr& job) {
  const sched::BindRequest& b = job->args;
  scheduler_.bind(b.pod_uid, b.pod_namespace, b.pod_name, b.node, [this, job](Result<model::Allocation> r) {
    // Possibly on another member's thread (a gang's barrier): continue on a worker.
    enqueue([this, job, r]() { commit(job, r); });
  });
}

void Binder::commit(const JobPtr& job, Result<model::Allocation> reserved) {
  const sched::BindRequest& b = job->args;
  const std::string key = b.pod_namespace + "/" + b.pod_name;
  if (!reserved.isOk()) {
    // Nothing was reserved. A pod this Troupe has no filter record of (it restarted since
    // kube-scheduler filtered it) is refused too: kube-scheduler filters it again on retry.
    finish(job, reserved.status());
    return;
  }
  const model::Allocation a = reserved.value();
  const std::string path = podPath(b.pod_namespace, b.pod_name);
  nlohmann::json metadata = {{"name", b.pod_name}, {"namespace", b.pod_namespace}, {"uid", b.pod_uid}};
  // The API server copies a Binding's annotations onto the pod as it binds it.
  if (!a.gpus.empty()) metadata["annotations"] = {{sched::kAnnotationGpus, formatGpus(a.gpus)}};
  nlohmann::json binding = {{"apiVersion", "v1"},
                            {"kind", "Binding"},
                            {"metadata", std::move(metadata)},
                            {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", b.node}}}};
  markSending(job);
  ApiReply r = api_.request("POST", path + "/binding", binding.dump());
  if (r.ok()) {
    markCreated(b.pod_uid);
    if (events_) {
      events_->podEvent(PodRef{b.pod_namespace, b.pod_name, b.pod_uid}, "Normal", "GPUsAssigned",
                        assignmentMessage(a));
    }
    finish(job, a);
    return;
  }
  switch (r.kind) {
    case ApiErrorKind::kNotFound:
      abandon(b.pod_uid);
      finish(job, notFound("pod " + key + " was deleted before it could be bound; its GPUs are free again"));
      return;
    case ApiErrorKind::kConflict:  // already bound (perhaps by our own earlier attempt), or replaced
    case ApiErrorKind::kServer:    // may have been stored
    case ApiErrorKind::kTransport: verify(job, a, r.message); return;
    default:
      abandon(b.pod_uid);
      finish(job, toStatus(r, "create the Binding of pod " + key + " to node " + b.node));
      return;
  }
}

void Binder::verify(const JobPtr& job, const model::Allocation& a, const std::string& failure) {
  const sched::BindRequest& b = job->args;
  const std::string key = b.pod_namespace + "/" + b.pod_name;
  ApiReply r = getPod(b.pod_namespace, b.pod_name);
  if (r.kind == ApiErrorKind::kNotFound) {
    abandon(b.pod_uid);
    finish(job, notFound("pod " + key + " was deleted while it was being bound (" + failure + ")"));
    return;
  }
  Result<PodView> pod = invalidArgument("no pod");
  if (r.ok()) {
    Result<Json> doc = parseKubeJson(r.body);
    if (doc.isOk()) pod = decodePod(doc.value());
  }
  if (!pod.isOk()) {
    // Neither answer is known: keep the GPUs until the pod can be read (reconcile()).
    markUnconfirmed(job);
    finish(job, unavailable(
                    "the Binding of pod " + key + " to node " + b.node + " may or may not exist (" + failure +
                    "; reading the pod back failed: " + (r.ok() ? pod.status().message() : r.message) +
                    "); Troupe keeps GPUs " + formatGpus(a.gpus) + " there until it can tell"));
    return;
  }
  const PodView& p = pod.value();
  if (p.facts.uid == b.pod_uid && p.facts.node_name == b.node) {
    logger_.info("binding confirmed after an error", {{"pod", key}, {"node", b.node}, {"error", failure}});
    markCreated(b.pod_uid);
    // Bound here, perhaps by an earlier attempt or another replica: the GPUs are the pod's
    // annotation (usually this reservation), and the answer says so.
    sync_.applyPod(p);
    model::Allocation held = scheduler_.allocationOf(b.pod_uid).value_or(a);
    if (events_) {
      events_->podEvent(PodRef{b.pod_namespace, b.pod_name, b.pod_uid}, "Normal", "GPUsAssigned",
                        assignmentMessage(held));
    }
    finish(job, held);
    return;
  }
  abandon(b.pod_uid);
  if (p.facts.uid == b.pod_uid && p.bound()) sync_.applyPod(p);  // bound elsewhere: count the truth
  std::string why = p.facts.uid != b.pod_uid ? "the pod was replaced by another of the same name"
                    : p.bound()              ? "it is bound to node " + p.facts.node_name
                                             : "it is not bound";
  finish(job, failedPrecondition("cannot bind pod " + key + " to node " + b.node + ": " + failure + " (" +
                                 why + ")"));
}

void Binder::finish(const JobPtr& job, Result<model::Allocation> result) {
  const auto ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - job->start).count();
  logger_.debug("bind finished", {{"pod", job->args.pod_namespace + "/" + job->args.pod_name},
                                  {"ok", result.isOk() ? "true" : "false"},
                                  {"ms", std::to_string(ms)}});
  job->done(std::move(result));
  JobPtr next;
  {
    std::lock_guard lock(pods_mu_);
    next = takeNextLocked(job->args.pod_uid);
  }
  if (next) enqueue([this, next] { prepare(next); });
}

Binder::JobPtr Binder::takeNextLocked(const std::string& uid) {
  auto it = busy_.find(uid);
  if (it == busy_.end()) return nullptr;
  if (it->second.empty()) {
    busy_.erase(it);  // the pod is free again
    return nullptr;
  }
  JobPtr next = it->second.front();
  it->second.pop_front();
  return next;
}

bool Binder::reconcile(std::optional<EchoCheck> echo) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  auto overdue = [&](const Sent& sent) {
    return echo && echo->timeout.count() > 0 && sent.state == Sent::State::kCreated &&
           now - std::max(sent.created, echo->stream_opened) >= echo->timeout;
  };
  std::vector<std::pair<std::string, Target>> todo;
  {
    std::lock_guard lock(pods_mu_);
    for (const auto& [uid, sent] : sent_) {
      if (!busy_.count(uid) && (sent.state == Sent::State::kUnconfirmed || overdue(sent))) {
        todo.emplace_back(uid, sent.target);
      }
    }
  }
  bool missed = false;
  for (const auto& [uid, t] : todo) {
    Sent::State state = Sent::State::kSending;
    Clock::time_point created;
    {
      std::lock_guard lock(pods_mu_);
      auto it = sent_.find(uid);
      if (busy_.count(uid) || it == sent_.end()) continue;  // being bound again, or watched meanwhile
      state = it->second.state;
      created = it->second.created;
      // One missed Binding is enough: the relist that follows brings the others.
      if (state == Sent::State::kCreated && missed) continue;
      busy_.emplace(uid, std::deque<JobPtr>{});
    }
    // The same reading settles both: the pod as the API has it now is the truth.
    ApiReply r = getPod(t.ns, t.name);
    bool settled = false;
    bool bound = false;
    if (r.kind == ApiErrorKind::kNotFound) {
      releasePod(uid);
      settled = true;
    } else if (r.ok()) {
      Result<Json> doc = parseKubeJson(r.body);
      Result<PodView> pod = doc.isOk() ? decodePod(doc.value()) : Result<PodView>(doc.status());
      if (pod.isOk()) {
        const PodView& p = pod.value();
        bound = p.facts.uid == uid && p.bound();
        if (bound) {
          sync_.applyPod(p);  // what the API says replaces the reservation (usually the same)
        } else {
          releasePod(uid);
        }
        settled = true;
        if (state == Sent::State::kUnconfirmed) {
          logger_.info("unconfirmed binding settled",
                       {{"pod", t.ns + "/" + t.name}, {"bound", bound ? p.facts.node_name : "no"}});
        }
      } else if (state == Sent::State::kCreated) {
        settled = true;  // unreadable: no verdict on the watch, and nothing to retry
      }
    }
    if (settled && bound && state == Sent::State::kCreated) {
      // Kubernetes delivers a pod's change to its watchers within milliseconds; this long
      // without it, the stream is open but dead.
      missed = true;
      logger_.warn(
          "pod watch stale: a binding Troupe made is bound in the API but the watch has not shown it",
          {{"pod", t.ns + "/" + t.name},
           {"node", t.node},
           {"seconds_since_binding",
            std::to_string(std::chrono::duration<double>(Clock::now() - created).count())}});
    }
    JobPtr next;
    {
      std::lock_guard lock(pods_mu_);
      if (settled) sent_.erase(uid);
      next = takeNextLocked(uid);
    }
    if (next) enqueue([this, next] { prepare(next); });
  }
  return missed;
}

}  // namespace troupe::kube
