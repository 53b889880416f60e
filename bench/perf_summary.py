#!/usr/bin/env python3
"""Summarises a `perf record --call-graph dwarf` profile of troupe_bench.

Reads `perf script -F comm,ip,sym --no-inline` text on stdin and prints, for the samples
inside ANCHOR (default troupe::http::ExtenderHandler::handle):
  1. where the time goes below the anchor: the call path down to DEPTH frames (inclusive %),
  2. the hottest leaf functions (self %),
  3. the leaf time by kind (allocator, JSON parse, JSON copy/destroy, JSON dump, core, ...).

  perf record -F 499 --call-graph dwarf,16384 -o perf.data -- \
      build/bench/troupe_bench --nodes 1000 --only filter/full --pods 4gpu --iterations 20 \
      --no-loopback --no-memory
  perf script -i perf.data -F comm,ip,sym --no-inline | bench/perf_summary.py [--depth 3]

With --server it instead splits every sample of a loopback run (all threads) into the HTTP
stack (cpprestsdk, pplx, asio), the handler's stages and the load generator. See
bench/profile.sh for both.
"""
import argparse
import collections
import re
import sys


def short(sym):
    s = re.sub(r"nlohmann::json_abi_v[0-9_]+::", "", sym)
    s = re.sub(r"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >", "string", s)
    s = re.sub(r"\(anonymous namespace\)::", "", s)
    # Drop template argument lists and parameter lists for readability.
    out, depth = [], 0
    for ch in s:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<>")
            continue
        if ch == ">" and depth > 0:
            depth -= 1
            continue
        if depth == 0:
            out.append(ch)
    s = "".join(out).replace("basic_json<>", "json")
    s = re.sub(r"\(.*\)", "", s)
    s = s.replace("[abi:cxx11]", "")
    return s.strip()


KINDS = [
    ("allocator (malloc/free)", re.compile(r"malloc|_int_free|free|unlink_chunk|consolidate|operator new|operator delete|tcache|brk|mmap|munmap")),
    ("JSON parse (lexer/parser)", re.compile(r"lexer|parser|json_sax|scan_|from_chars|strto")),
    ("JSON destroy", re.compile(r"destroy|~")),
    ("JSON dump (serializer)", re.compile(r"serializer|dump")),
    ("memcpy/memmove/strlen", re.compile(r"mem(cpy|move|set|cmp)|strlen|__memmove")),
    ("JSON build/copy", re.compile(r"json|ordered_map|json_value|emplace|push_back|string")),
    ("Troupe core/wire", re.compile(r"troupe::")),
    ("kernel", re.compile(r"^0x|^\[k\]|page_fault|clear_page|do_")),
]


def kind_of(sym):
    for name, rx in KINDS:
        if rx.search(sym):
            return name
    return "other"


def server_split(samples):
    def has(stack, text):
        return any(text in f for f in stack)

    parts = collections.Counter()
    for st in samples:
        if has(st, "ExtenderHandler::handle"):
            if has(st, "decodeExtenderArgs"):
                parts["handler: JSON decode (decodeExtenderArgs)"] += 1
            elif has(st, "Scheduler::filter") or has(st, "Scheduler::prioritize"):
                parts["handler: scheduling core"] += 1
            elif has(st, "encodeFilterResult") or has(st, "encodeHostPriorityList"):
                parts["handler: JSON encode"] += 1
            elif has(st, "observeRequest") or has(st, "countRejections"):
                parts["handler: metrics"] += 1
            else:
                parts["handler: rest (freeing the request, ...)"] += 1
        elif has(st, "runLoad"):
            parts["load generator (client side of the benchmark)"] += 1
        elif any(x in f for f in st for x in ("cpprest", "web::http", "pplx", "boost::asio", "Concurrency::streams")):
            parts["HTTP stack: cpprestsdk / pplx / asio"] += 1
        elif has(st, "measureLoopback") or has(st, "Service::Service") or has(st, "learnNodes"):
            parts["benchmark setup"] += 1
        else:
            parts["other (kernel, allocator, unattributed)"] += 1
    total = sum(parts.values())
    print(f"{total} samples, all threads:")
    for k, n in parts.most_common():
        print(f"  {100.0 * n / total:5.1f}%  {k}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--anchor", default="troupe::http::ExtenderHandler::handle")
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--min", type=float, default=1.0, help="hide paths below this percent")
    ap.add_argument("--server", action="store_true", help="split a loopback run by component")
    args = ap.parse_args()

    samples, frames = [], []
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.strip():
            if frames:
                samples.append(frames)
            frames = []
            continue
        if line.startswith("\t") or line.startswith(" "):
            parts = line.strip().split(" ", 1)
            frames.append(parts[1] if len(parts) > 1 else "?")
    if frames:
        samples.append(frames)

    total = len(samples)
    if args.server:
        return server_split(samples)
    paths = collections.Counter()
    leaves = collections.Counter()
    kinds = collections.Counter()
    inside = 0
    for stack in samples:  # leaf first
        root_first = list(reversed(stack))
        idx = next((i for i, f in enumerate(root_first) if args.anchor in f), None)
        if idx is None:
            continue
        inside += 1
        below = [short(f) for f in root_first[idx + 1:]]
        for d in range(1, args.depth + 1):
            if len(below) >= d:
                paths[tuple(below[:d])] += 1
        leaf = short(stack[0])
        leaves[leaf] += 1
        kinds[kind_of(leaf)] += 1

    if inside == 0:
        print(f"no samples under {args.anchor} ({total} samples in all)")
        return 1
    pct = lambda n: 100.0 * n / inside
    print(f"{inside} of {total} samples ({100.0 * inside / total:.1f}%) are inside {short(args.anchor)}; "
          f"percentages below are of those.\n")
    print("Call paths below the anchor (inclusive):")
    # Print as a tree, children sorted by weight.
    def children(prefix):
        return sorted(((p, n) for p, n in paths.items() if len(p) == len(prefix) + 1 and p[:len(prefix)] == prefix),
                      key=lambda kv: -kv[1])

    def walk(prefix):
        for p, n in children(prefix):
            if pct(n) < args.min:
                continue
            print(f"  {'  ' * (len(p) - 1)}{pct(n):5.1f}%  {p[-1]}")
            walk(p)

    walk(())
    print(f"\nHottest leaf functions (self):")
    for sym, n in leaves.most_common(args.top):
        print(f"  {pct(n):5.1f}%  {sym[:150]}")
    print(f"\nLeaf time by kind:")
    for k, n in kinds.most_common():
        print(f"  {pct(n):5.1f}%  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
