// List-then-watch of one resource, the way client-go's reflector does it:
//
//   1. LIST in pages (limit=500, continue tokens), handing each object to the handler between
//      beginList() (called before the first request) and endList(): the handler replaces its
//      state with what was listed. A list that fails half way is never ended; the next one
//      begins again.
//   2. WATCH from the list's resourceVersion with allowWatchBookmarks=true and a
//      timeoutSeconds; every event and bookmark advances the resourceVersion, so a closed
//      watch resumes where it stopped, and nothing is lost or repeated.
//   3. 410 Gone (on the watch request or as an ERROR event), or an expired continue token:
//      list again from scratch.
//   4. A resource whose API may not be installed (a CRD) sets `missing_hint`: a 404 on its list
//      is logged once at warn with that hint (and then at debug while it lasts), and retried
//      with the same backoff, so installing it later is picked up without a restart.
//   5. Any other failure: wait with capped exponential backoff and jitter (0.5 s doubling to
//      30 s, each wait a random point in its upper half), then resume.
//   6. relistNow() from another thread (the runtime's liveness check found the watch silent
//      although the resource changed): the open stream is ended and the next step lists.
//
// Runs on its own thread until stop; the handler is called from that thread only. With
// metrics, it reports when its cache was last current, relists and watch restarts.
//
// An exception thrown by the handler for one object is logged and counted as an internal error
// (where="watch") and that object is passed over; one thrown anywhere else in a step fails the
// step (backoff, then the step again). The thread never ends on an exception.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "adapters/common/internal_errors.h"
#include "adapters/common/kube_metrics.h"
#include "adapters/common/logger.h"
#include "adapters/kube/client/api_client.h"
#include "adapters/kube/runtime/stop_signal.h"
#include "adapters/kube/watch/kube_objects.h"
#include "adapters/kube/watch/watch_handler.h"

namespace troupe::kube {

class Backoff {
 public:
  // `uniform` returns a number in [0, 1); injected so tests are deterministic.
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds cap, std::function<double()> uniform);
  // The next wait: the current step scaled into [step/2, step), then the step doubles (capped).
  std::chrono::milliseconds next();
  void reset();
  std::chrono::milliseconds step() const { return step_; }

 private:
  const std::chrono::milliseconds initial_, cap_;
  std::function<double()> uniform_;
  std::chrono::milliseconds step_;
};

struct WatchConfig {
  std::string name;            // "nodes", for logs
  std::string path;            // "/api/v1/nodes"
  std::string field_selector;  // e.g. "status.phase!=Succeeded,status.phase!=Failed"
  int page_size = 500;
  int timeout_seconds = 300;  // per watch request; a random 0-25% is added
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_cap{30000};
  // Set for an optional API (a CRD): what a 404 on the list means and how to fix it.
  std::string missing_hint;
};

struct WatchStats {
  uint64_t lists = 0;    // full lists completed
  uint64_t watches = 0;  // watch requests that got a 200
  uint64_t events = 0;
  uint64_t bookmarks = 0;
  uint64_t gone = 0;       // 410s that forced a relist
  uint64_t failures = 0;   // failed requests (backed off)
  uint64_t requested = 0;  // relists asked for by relistNow()
};

class Watcher {
 public:
  // `metrics` (optional, not owned) must outlive the watcher.
  Watcher(KubeTransport& api, WatchConfig config, WatchHandler& handler, adapters::Logger& logger,
          std::function<double()> uniform, adapters::KubeMetrics* metrics = nullptr,
          adapters::InternalErrors internal_errors = {});

  // Lists and watches until `stop` fires.
  void run(StopSignal& stop);

  // One step of run(), for tests: lists when there is no resourceVersion, else watches once.
  // False when the step failed (run() would back off).
  bool step(StopSignal& stop);

  // Thread-safe. Ends the open watch stream, if any, and makes the next step list again (a
  // stream that is silent but not closed would otherwise last until its timeout); counted as a
  // watch restart with `reason`.
  void relistNow(std::string reason);
  // Thread-safe. When the open watch request was sent; nullopt while listing or backing off.
  std::optional<std::chrono::steady_clock::time_point> watchingSince() const;

  const std::string& resourceVersion() const { return resource_version_; }
  const WatchStats& stats() const { return stats_; }
  Backoff& backoff() { return backoff_; }

 private:
  bool list(StopSignal& stop);
  // Hands one object to the handler; an exception is reported and the object passed over.
  template <class F>
  void deliver(const Json& object, const char* what, F&& call);
  bool watch(StopSignal& stop);
  std::string query(bool watch, int timeout_seconds) const;
  // Takes a pending relistNow() request; when there is one, forgets the resourceVersion (the
  // next step lists), counts and logs the restart, and returns true.
  bool takeRelistRequest();
  void relisting(const std::string& reason);
  void synced();
  void restarted(const std::string& reason);

  KubeTransport& api_;
  WatchConfig config_;
  WatchHandler& handler_;
  adapters::Logger& logger_;
  std::function<double()> uniform_;
  Backoff backoff_;
  std::string resource_version_;
  WatchStats stats_;
  bool missing_logged_ = false;  // the 404 of an optional API was logged; until a list succeeds
  adapters::KubeMetrics* metrics_;
  adapters::InternalErrors internal_errors_;

  mutable std::mutex abort_mu_;  // guards the three below, which relistNow() reaches from other threads
  std::shared_ptr<StopSignal> stream_stop_;  // the open stream's: stopping it ends only the stream
  std::chrono::steady_clock::time_point stream_since_;
  std::string relist_reason_;  // asked for by relistNow(), not acted on yet
};

}  // namespace troupe::kube
