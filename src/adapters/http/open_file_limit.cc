#include "adapters/http/open_file_limit.h"

#include <sys/resource.h>

#include <algorithm>

namespace troupe::http {

size_t connectionsThatFit(uint64_t soft, size_t wanted, int listeners) {
  const uint64_t spare = soft > kReservedFiles ? soft - kReservedFiles : 0;
  const uint64_t each = spare / static_cast<uint64_t>(std::max(1, listeners));
  return static_cast<size_t>(std::min<uint64_t>(wanted, std::max<uint64_t>(each, 16)));
}

OpenFileLimit raiseOpenFileLimit(size_t wanted, int listeners) {
  OpenFileLimit out;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    out.max_connections = wanted;  // unknown: leave the cap as configured
    return out;
  }
  constexpr rlim_t kUnlimitedCap = rlim_t{1} << 20;  // the kernel's default fs.nr_open
  out.soft_before = out.soft = limit.rlim_cur;
  out.hard = limit.rlim_max;
  const rlim_t target = limit.rlim_max == RLIM_INFINITY ? kUnlimitedCap : limit.rlim_max;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < target) {
    rlimit raised = limit;
    raised.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) out.soft = target;
  }
  out.max_connections = out.soft == RLIM_INFINITY ? wanted : connectionsThatFit(out.soft, wanted, listeners);
  return out;
}

}  // namespace troupe::http
