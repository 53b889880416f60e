// Binding a pod through the API server, for kube-scheduler's bind verb:
//
//   1. Read the pod: from the pod watch when it shows the pod unbound, of one of Troupe's
//      profiles, and no Binding of it is outstanding (the common case: one request binds the
//      pod); otherwise GET it. Gone, or replaced by a pod of another uid: refuse. Its spec.schedulerName
//      is not one of Troupe's profiles (BinderOptions::scheduler_names): refuse, whatever
//      else holds, so the verb cannot be used to bind other schedulers' pods. Already bound
//      to this node (a retried bind whose answer was lost): success, and its GPUs are read
//      back from the annotation. Bound elsewhere: refuse.
//   2. Choose its GPUs with Scheduler::bind (the same choice prioritize scored; a gang member
//      waits there for its gang). A reservation left on another node by an earlier failed
//      attempt is dropped first. The core refuses a node that did not pass this pod's latest
//      filter, and a pod it has no filter record of: this Troupe restarted after the filter,
//      and kube-scheduler filters the pod again when it retries.
//      A watch that lags behind costs nothing in safety: the Binding's uid precondition and
//      the API server's refusal to bind a bound pod (409) send a stale case to the read-back
//      below, which finds the truth.
//   3. POST the pods/binding subresource, with the uid as precondition and troupe.dev/gpus in
//      the Binding's metadata.annotations: the API server copies them onto the pod in the same
//      write that sets spec.nodeName, so a bound pod always carries its GPUs, one write binds
//      it, and Troupe needs no right to patch pods.
//
// Concurrent binds to one node cannot overlap: the core reserves under its lock. Two binds of
// the same pod run one after the other. Failures leave no GPU held, with one exception: when
// the Binding may have been created but the API server could not confirm it either way, the
// reservation is kept ("unconfirmed") and reconcile() settles it as soon as the pod can be
// read: kept if it is bound there, released otherwise. So a pod that was bound never has its
// GPUs handed out in the meantime.
//
// Every Binding sent is also tracked until the pod watch shows the pod bound (or deleted): a
// created Binding the watch has not shown for a while means the watch is stale (open but
// silent). reconcile() then reads the pod, applies it, and tells the caller to relist.
//
// Binds run on the binder's own worker threads, never on the HTTP server's, and a gang
// member waiting at its barrier holds no thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "adapters/common/internal_errors.h"
#include "adapters/common/logger.h"
#include "adapters/kube/bind/events.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/watch/cluster_sync.h"
#include "adapters/kube/watch/kube_objects.h"
#include "troupe/sched/scheduler/pod_binder.h"
#include "troupe/sched/scheduler/scheduler.h"

namespace troupe::kube {

struct BinderOptions {
  int workers = 8;
  // The kube-scheduler profiles whose pods Troupe binds (spec.schedulerName); never empty.
  std::vector<std::string> scheduler_names = {"troupe-scheduler"};
  // A task that throws is counted here (where="binder"); the worker carries on.
  adapters::InternalErrors internal_errors;
};

class Binder final : public sched::PodBinder {
 public:
  using Done = std::function<void(Result<model::Allocation>)>;

  // `events` may be null (no Events are posted).
  Binder(KubeTransport& api, sched::Scheduler& scheduler, ClusterSync& sync, EventRecorder* events,
         adapters::Logger& logger, BinderOptions options = {});
  ~Binder() override;
  Binder(const Binder&) = delete;
  Binder& operator=(const Binder&) = delete;

  void start();
  // Finishes what is queued, then stops the workers; later work runs on the caller's thread.
  void stop();

  void bindAsync(const sched::BindRequest& args, Done done) override;
  // The same, waiting for the answer (tests). Without start() it runs on this thread.
  Result<model::Allocation> bind(const sched::BindRequest& args);

  // Watch liveness: how long a created Binding may go unseen by the pod watch, counted from
  // the Binding or from when the current watch stream was opened, whichever is later.
  struct EchoCheck {
    std::chrono::steady_clock::time_point stream_opened;
    std::chrono::milliseconds timeout;
  };
  // Settles unconfirmed reservations whose pod can be read now. With `echo`, also reads the
  // pods of created Bindings the watch has not shown in time: true when one of them is bound
  // (the watch missed it; the pod is applied from the read). Call it every few seconds.
  bool reconcile(std::optional<EchoCheck> echo = std::nullopt);
  size_t unconfirmedCount() const;
  // Bindings sent or created that the pod watch has not shown yet.
  size_t unechoedCount() const;

 private:
  struct Job {
    sched::BindRequest args;
    Done done;
    PodView pod;
    std::chrono::steady_clock::time_point start;
  };
  using JobPtr = std::shared_ptr<Job>;
  struct Target {
    std::string ns, name, node;
  };
  // A Binding this binder sent, until the pod watch shows its pod bound or deleted.
  struct Sent {
    enum class State {
      kSending,      // no answer yet
      kUnconfirmed,  // it may or may not exist: reconcile() settles it
      kCreated,      // the API server created it at `created`
    };
    Target target;
    State state = State::kSending;
    std::chrono::steady_clock::time_point created;
  };

  void enqueue(std::function<void()> task);
  void workerLoop();
  void begin(const JobPtr& job);
  void prepare(const JobPtr& job);
  // The pod watch shows the pod unbound, of Troupe's profiles, and no Binding of it is
  // outstanding: no need to read it before binding.
  bool watchedUnbound(const JobPtr& job);
  void reserveUnbound(const JobPtr& job);
  // The next bind queued behind the pod's current one, or nullptr (and the pod is no longer
  // busy). Caller holds pods_mu_.
  JobPtr takeNextLocked(const std::string& uid);
  void reserve(const JobPtr& job);
  void commit(const JobPtr& job, Result<model::Allocation> reserved);
  // After a binding failure whose outcome is unclear: reads the pod to find out.
  void verify(const JobPtr& job, const model::Allocation& allocation, const std::string& failure);
  void finish(const JobPtr& job, Result<model::Allocation> result);
  bool acquire(const JobPtr& job);  // false: parked until the pod's current bind finishes
  void releasePod(const std::string& uid);
  // Before the Binding is sent, so a watch event that beats the answer is not missed.
  void markSending(const JobPtr& job);
  void markCreated(const std::string& uid);
  void markUnconfirmed(const JobPtr& job);
  void forgetSent(const std::string& uid);
  // The pod is not bound and no Binding of it is outstanding: its GPUs go back and the watch
  // is not expected to show it.
  void abandon(const std::string& uid);
  void podWatched(const std::string& uid);  // from ClusterSync, on the pod watcher's thread
  ApiReply getPod(const std::string& ns, const std::string& name);

  KubeTransport& api_;
  sched::Scheduler& scheduler_;
  ClusterSync& sync_;
  EventRecorder* events_;
  adapters::Logger& logger_;
  const BinderOptions options_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;

  mutable std::mutex pods_mu_;                                // guards busy_ and sent_
  std::unordered_map<std::string, std::deque<JobPtr>> busy_;  // pod uid -> binds waiting for it
  std::unordered_map<std::string, Sent> sent_;                // pod uid -> its Binding
};

}  // namespace troupe::kube
