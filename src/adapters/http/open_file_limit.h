// The process's open-file limit (RLIMIT_NOFILE) against the connections its listeners may hold.
// Every connection is a file descriptor; a listener that runs out cannot accept, not even a
// kubelet probe. So serve raises the soft limit to the hard one at start (as Go programs do;
// Troupe's libraries use epoll, never select(), so descriptors above 1024 are safe), and when
// the limit is still too low for limits.maxConnections on every listener, lowers the cap to
// what fits: at the cap a flood then costs idle connections (ConnectionTable), not accepts.
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe::http {

// Descriptors kept for everything but the listeners' connections: the Kubernetes API client
// and its watches, logs, TLS and config files, the listening sockets themselves.
inline constexpr uint64_t kReservedFiles = 256;

struct OpenFileLimit {
  uint64_t soft_before = 0;  // the soft limit the process started with
  uint64_t soft = 0;         // after raising it (the same when it could not be raised)
  uint64_t hard = 0;
  size_t max_connections = 0;  // per listener: the wanted cap, or what fits in `soft`
};

// The per-listener cap that fits `soft` descriptors with kReservedFiles kept aside (at least 16).
size_t connectionsThatFit(uint64_t soft, size_t wanted, int listeners);

// Raises the soft limit to the hard limit (capped at 2^20 when the hard one is unlimited) and
// fits `wanted` connections per listener into it.
OpenFileLimit raiseOpenFileLimit(size_t wanted, int listeners);

}  // namespace troupe::http
