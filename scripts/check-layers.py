#!/usr/bin/env python3
"""The core stays pure and the adapters depend on the core only.

  common  ->  the C++ standard library only
  model   ->  + troupe/common
  sched   ->  + troupe/model            (the scheduling core: no I/O, no JSON, no YAML, no HTTP)
  sim     ->  + troupe/sched            (the simulator runs the core; it reads files itself)

The core (the four above) includes no third-party header and no adapter. Each adapter
(src/adapters/NAME) includes the core, third-party libraries, its own headers and
src/adapters/common, never another adapter's headers: what two adapters share lives in
adapters/common (logging, Kubernetes object decoding, the interfaces they report through), and
the app (src/app) wires them together. A violation names the file, the line and the include,
and says where what the file needs belongs. Run from anywhere: scripts/check-layers.py
(--self-test checks the rules themselves on made-up files).
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


def files_under(*bases):
    for base in bases:
        if not os.path.isdir(base):
            continue
        for dirpath, _, names in os.walk(base):
            for n in sorted(names):
                if n.endswith((".h", ".cc")):
                    yield os.path.join(dirpath, n)


def files_of(layer):
    yield from files_under(os.path.join(ROOT, "src", layer), os.path.join(ROOT, "include", "troupe", layer))


def adapters():
    base = os.path.join(ROOT, "src", "adapters")
    return sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d))) if os.path.isdir(base) else []


def includes(lines):
    for lineno, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if m:
            yield lineno, m.group(1), m.group(2)


def shown(kind, header):
    return f"#include {kind}{header}{'>' if kind == '<' else kind}"


def core_problems(rel, layer, lines):
    allowed = LAYERS[layer]
    for lineno, kind, header in includes(lines):
        where = f"{rel}:{lineno}: {shown(kind, header)}"
        if kind == "<":
            if header not in STD:
                yield (f"{where}: not the standard library; the {layer} layer may not use third-party or "
                       f"system headers (move that code to an adapter)")
            elif layer in NO_IO and header in IO_HEADERS:
                yield f"{where}: I/O or threads in the pure core; move it to an adapter"
            continue
        parts = header.split("/")
        if parts[0] == "adapters":
            yield (f"{where}: the core may not include an adapter; define the interface it needs in the "
                   f"core (as troupe/sched/scheduler/pod_binder.h does) and let the adapter implement it")
        elif len(parts) < 3 or parts[0] != "troupe" or parts[1] not in allowed:
            yield (f"{where}: the {layer} layer may include only troupe/{{{','.join(allowed)}}}/...; what it "
                   f"needs belongs in one of those layers, or this code belongs in an adapter")


def adapter_problems(rel, adapter, lines):
    own = {adapter, "common"}
    for lineno, kind, header in includes(lines):
        if kind == "<":
            continue  # the standard library and the adapter's third-party library
        parts = header.split("/")
        if parts[0] == "troupe":
            continue  # the core
        if parts[0] == "adapters" and len(parts) >= 3 and parts[1] in own:
            continue
        where = f"{rel}:{lineno}: {shown(kind, header)}"
        if parts[0] == "adapters" and len(parts) >= 3:
            yield (f"{where}: adapters/{adapter} may not include adapters/{parts[1]}; move what both need to "
                   f"src/adapters/common (or an interface there, or in the core), and let src/app wire "
                   f"the two together")
        else:
            yield (f"{where}: adapters/{adapter} may include only troupe/..., adapters/{adapter}/..., "
                   f"adapters/common/... and <library> headers")


def self_test():
    core, adapter = core_problems, adapter_problems
    # (checker, file, its layer or adapter, its include lines, a phrase the first problem must
    # contain, or None when the file is clean)
    cases = [
        (core, "src/sched/x.cc", "sched", ["#include <nlohmann/json.hpp>"], "not the standard library"),
        (core, "src/common/x.cc", "common", ["#include <yaml-cpp/yaml.h>"], "not the standard library"),
        (core, "src/sched/x.cc", "sched", ['#include "adapters/common/logger.h"'], "may not include an adapter"),
        (core, "src/model/x.cc", "model", ['#include "troupe/sched/policies/policy.h"'], "may include only troupe/"),
        (core, "src/sched/x.cc", "sched", ["#include <fstream>"], "I/O or threads"),
        (core, "src/sched/x.cc", "sched", ["#include <vector>", '#include "troupe/model/node.h"'], None),
        (adapter, "src/adapters/kube/x.h", "kube", ['#include "adapters/http/wire.h"'], "may not include adapters/http"),
        (adapter, "src/adapters/http/x.h", "http", ['#include "adapters/metrics/metrics.h"'],
         "may not include adapters/metrics"),
        (adapter, "src/adapters/common/x.h", "common", ['#include "adapters/kube/bind/binder.h"'],
         "may not include adapters/kube"),
        (adapter, "src/adapters/yaml/x.h", "yaml", ['#include "app/commands.h"'], "may include only"),
        (adapter, "src/adapters/kube/x.h", "kube", ["#include <cpprest/http_client.h>", '#include "adapters/kube/y.h"',
                                                   '#include "adapters/common/logger.h"',
                                                   '#include "troupe/sched/scheduler/pod_binder.h"'], None),
    ]
    failures = []
    for check, rel, where, lines, want in cases:
        got = list(check(rel, where, lines))
        if want is None and got:
            failures.append(f"{rel} {lines}: expected no problem, got {got}")
        elif want is not None and (not got or want not in got[0]):
            failures.append(f"{rel} {lines}: expected a problem with '{want}', got {got}")
    for f in failures:
        print("check-layers: self-test FAIL: " + f, file=sys.stderr)
    if failures:
        return 1
    print(f"check-layers: self-test: {len(cases)} made-up files judged as expected")
    return 0


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    problems, core_files, adapter_files = [], 0, 0
    for layer in LAYERS:
        for path in files_of(layer):
            core_files += 1
            problems += core_problems(os.path.relpath(path, ROOT), layer, read_lines(path))
    for adapter in adapters():
        for path in files_under(os.path.join(ROOT, "src", "adapters", adapter)):
            adapter_files += 1
            problems += adapter_problems(os.path.relpath(path, ROOT), adapter, read_lines(path))
    for p in problems:
        print("check-layers: FAIL: " + p, file=sys.stderr)
    if problems:
        return 1
    print(f"check-layers: {core_files} files of common, model, sched and sim include only the standard "
          f"library and the layers below them; {adapter_files} adapter files include only the core, "
          f"adapters/common, their own adapter and libraries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
