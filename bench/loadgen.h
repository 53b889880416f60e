// A small closed-loop HTTP/1.1 load generator on raw POSIX sockets (one epoll thread, K
// keep-alive connections, each sending its next request as soon as the previous answer is
// read), so the client costs little of the CPU it shares with the server under test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::bench {

struct LoadResult {
  std::string client = "built-in";  // or "wrk"
  int connections = 0;
  double seconds = 0;     // measured window
  uint64_t requests = 0;  // completed with status 200
  uint64_t errors = 0;    // non-200 answers or broken connections
  double rps = 0;
  double p50_ms = 0, p99_ms = 0, mean_ms = 0, max_ms = 0;  // client-side, request to full answer
  std::string first_error;                                 // the first problem seen, for the report
};

// POSTs `bodies` (cycled) to http://127.0.0.1:port`path` from `connections` connections for
// `seconds`, after `warmup_seconds` of unrecorded traffic; then waits for the answers still in
// flight, so the server is idle when this returns.
LoadResult runLoad(int port, const std::string& path, const std::vector<std::string>& bodies, int connections,
                   double seconds, double warmup_seconds);

// The same load from wrk (https://github.com/wg/wrk) when it is on PATH: one body, 2 threads.
// Returns false with `error` set when wrk is missing or its output cannot be read.
bool runWrk(int port, const std::string& path, const std::string& body, int connections, double seconds,
            LoadResult* out, std::string* error);

// A free TCP port on 127.0.0.1 (bind to 0, read it back, close); 0 on failure.
int freeLoopbackPort();

}  // namespace troupe::bench
