// A KubeTransport that counts every call to the API server in Troupe's metrics
// (troupe_kube_api_requests_total{verb, code}), then passes the reply on unchanged.
//
// Labels stay bounded: verb is the HTTP method, LIST for a GET of a collection page and WATCH
// for a stream; code is the HTTP status, or the failure kind when no response came
// (Unreachable, ConnectionLost). Calls cancelled by Troupe's own shutdown are not counted.
#pragma once

#include <string>

#include "adapters/common/kube_metrics.h"
#include "adapters/kube/client/api_client.h"

namespace troupe::kube {

class MeteredTransport final : public KubeTransport {
 public:
  // Neither is owned; both must outlive this transport.
  MeteredTransport(KubeTransport& inner, adapters::KubeMetrics& metrics) : inner_(inner), metrics_(metrics) {}

  ApiReply request(const std::string& method, const std::string& path, const std::string& body = "",
                   const std::string& content_type = "application/json") override;
  ApiReply stream(const std::string& path, std::chrono::seconds idle_timeout,
                  const std::function<bool(std::string&)>& on_line, StopSignal& stop) override;

 private:
  void count(const std::string& verb, const ApiReply& reply);

  KubeTransport& inner_;
  adapters::KubeMetrics& metrics_;
};

// The verb label of a request: LIST for a GET with a page limit, else the method.
std::string apiVerbLabel(const std::string& method, const std::string& path);
// The code label of a reply: "200", "410", or "Unreachable" when no response arrived.
std::string apiCodeLabel(const ApiReply& reply);

}  // namespace troupe::kube
