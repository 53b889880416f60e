#!/usr/bin/env python3
"""The core stays pure: each layer includes only the standard library and the layers below it.

  common  ->  the C++ standard library only
  model   ->  + troupe/common
  sched   ->  + troupe/model            (the scheduling core: no I/O, no JSON, no YAML, no HTTP)
  sim     ->  + troupe/sched            (the simulator runs the core; it reads files itself)

Adapters (src/adapters/...) and the CLI (src/app) may include anything; nothing in the layers
above may include them. A violation names the file, the line and the include, and says which
layer may hold what the file needs. Run from anywhere: scripts/check-layers.py
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The C++20 standard library headers and the C headers in their <cxxx> form. A header outside
# this list (a third-party <nlohmann/json.hpp>, a POSIX <unistd.h>) is I/O or an adapter's job.
STD = set("""
algorithm any array atomic barrier bit bitset cassert cctype cerrno cfenv cfloat charconv chrono
cinttypes climits clocale cmath codecvt compare complex concepts condition_variable coroutine
csetjmp csignal cstdarg cstddef cstdint cstdio cstdlib cstring ctime cuchar cwchar cwctype deque
exception execution expected filesystem format forward_list fstream functional future initializer_list
iomanip ios iosfwd iostream istream iterator latch limits list locale map memory memory_resource
mutex new numbers numeric optional ostream queue random ranges ratio regex scoped_allocator
semaphore set shared_mutex source_location span sstream stack stdexcept stop_token streambuf
string string_view syncstream system_error thread tuple type_traits typeindex typeinfo
unordered_map unordered_set utility valarray variant vector version
""".split())

# Layer -> the troupe/ header folders it may include (its own and those below it).
LAYERS = {
    "common": ["common"],
    "model": ["common", "model"],
    "sched": ["common", "model", "sched"],
    "sim": ["common", "model", "sched", "sim"],
}
# The core does no I/O: streams and files belong to the adapters (sim reads traces itself).
NO_IO = {"common", "model", "sched"}
IO_HEADERS = {"fstream", "iostream", "filesystem", "cstdio", "thread", "future", "syncstream"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def files_of(layer):
    for base in (os.path.join(ROOT, "src", layer), os.path.join(ROOT, "include", "troupe", layer)):
        if not os.path.isdir(base):
            continue
        for dirpath, _, names in os.walk(base):
            for n in sorted(names):
                if n.endswith((".h", ".cc")):
                    yield os.path.join(dirpath, n)


def main():
    problems, checked = [], 0
    for layer, allowed in LAYERS.items():
        for path in files_of(layer):
            checked += 1
            rel = os.path.relpath(path, ROOT)
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    kind, header = m.groups()
                    where = f"{rel}:{lineno}: #include {kind}{header}{'>' if kind == '<' else kind}"
                    if kind == "<":
                        if header not in STD:
                            problems.append(f"{where}: not the standard library; the {layer} layer may not use "
                                            f"third-party or system headers (move that code to an adapter)")
                        elif layer in NO_IO and header in IO_HEADERS:
                            problems.append(f"{where}: I/O or threads in the pure core; move it to an adapter")
                        continue
                    parts = header.split("/")
                    if len(parts) < 3 or parts[0] != "troupe" or parts[1] not in allowed:
                        problems.append(f"{where}: the {layer} layer may include only troupe/"
                                        f"{{{','.join(allowed)}}}/...; what it needs belongs in one of those "
                                        f"layers, or this code belongs in an adapter")
    for p in problems:
        print("check-layers: FAIL: " + p, file=sys.stderr)
    if problems:
        return 1
    print(f"check-layers: {checked} files of common, model, sched and sim include only the standard "
          f"library and the layers below them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
