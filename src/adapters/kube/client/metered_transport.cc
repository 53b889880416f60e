#include "adapters/kube/client/metered_transport.h"

namespace troupe::kube {

std::string apiVerbLabel(const std::string& method, const std::string& path) {
  if (method == "GET") {
    const size_t q = path.find('?');
    if (q != std::string::npos && path.find("limit=", q) != std::string::npos) return "LIST";
  }
  return method;
}

std::string apiCodeLabel(const ApiReply& reply) {
  return reply.status > 0 ? std::to_string(reply.status) : apiErrorName(reply.kind);
}

void MeteredTransport::count(const std::string& verb, const ApiReply& reply) {
  if (reply.kind == ApiErrorKind::kCancelled) return;
  metrics_.kubeApiCall(verb, apiCodeLabel(reply));
}

ApiReply MeteredTransport::request(const std::string& method, const std::string& path,
                                   const std::string& body, const std::string& content_type) {
  ApiReply reply = inner_.request(method, path, body, content_type);
  count(apiVerbLabel(method, path), reply);
  return reply;
}

ApiReply MeteredTransport::stream(const std::string& path, std::chrono::seconds idle_timeout,
                                  const std::function<bool(std::string&)>& on_line, StopSignal& stop) {
  ApiReply reply = inner_.stream(path, idle_timeout, on_line, stop);
  count("WATCH", reply);
  return reply;
}

}  // namespace troupe::kube
