// What the Kubernetes adapter reports about the API server and its caches. The kube adapter
// depends on this interface, not on the Prometheus class (metrics::Metrics implements it), so
// it stays testable without Prometheus. `resource` is nodes | pods. Thread-safe.
#pragma once

#include <string>

namespace troupe::adapters {

class KubeMetrics {
 public:
  virtual ~KubeMetrics() = default;

  // Kubernetes mode is on: the series start at zero, so dashboards show 0 rather than nothing.
  virtual void enableKube() = 0;
  // The cache is known current as of now (a list completed, a watch event or bookmark arrived,
  // a watch ended cleanly).
  virtual void kubeSynced(const std::string& resource) = 0;
  // A full list again after the first (410 Gone, an expired continue token).
  virtual void kubeRelist(const std::string& resource) = 0;
  // A watch ended and will be reopened; reason: closed (server timeout) | gone | error.
  virtual void kubeWatchRestart(const std::string& resource, const std::string& reason) = 0;
  // One API call; verb GET | LIST | WATCH | PATCH | POST ...; code the HTTP status, or what
  // happened without one (Unreachable, ConnectionLost).
  virtual void kubeApiCall(const std::string& verb, const std::string& code) = 0;
  // Objects in the caches (pods: bound pods holding GPUs, the only ones kept).
  virtual void kubeCachedObjects(const std::string& resource, double count) = 0;
  // Defragmentation advice (docs/defrag.md): after each round, the pending pods (gangs count
  // once) that have a plan, the GPUs those plans would free and the moves they take.
  virtual void defragAdvice(double pending_pods, double gpus, double moves) = 0;
  // Running pods evicted for a plan (defrag.evict on).
  virtual void defragEvicted(double pods) = 0;
};

}  // namespace troupe::adapters
