#!/usr/bin/env python3
"""Soak: `troupe serve` under mixed valid and invalid traffic with connection churn and idle
floods, for a fixed time; its RSS, open file descriptors and p99 latencies at the start and at
the end (docs/benchmarks.md, "Soak").

Traffic, each kind from its own process (so the clients do not share one interpreter lock):
  scheduler  filter and prioritize on kept-alive connections at --rate calls a second, as
             kube-scheduler sends them (latency measured here);
  churn      a new connection per call, --rate / 2 a second: valid filters, and invalid inputs in
             turn (bad JSON 400, GET /filter 405, POST /nope 404, Content-Length 10^12 413, a
             100 KiB header 431, a malformed request line 400, a body cut off by the client);
  flood      --flood connections that never send a byte held on each port (above the default
             cap of 1,024 per port, so the server keeps closing the oldest), each one reopened
             when the server closes it, --flood-rate a second (each reopen closes another);
             plus 20 slow headers (1 byte a second) per port;
  probes     GET /healthz every 100 ms and GET /metrics every second on --metrics-listen, as
             kubelet and Prometheus do.
The server's VmRSS and /proc/PID/fd are sampled every second. The first and the last window
(a sixth of the run, at least 2 s) are compared; the file descriptors are counted again once
every client has closed.

Usage: bench/soak.py [--binary build/troupe] [--seconds 60] [--json out.json]
       bench/soak.py --seconds 5 --check      # CI smoke (ctest soak_smoke): every valid call
                                              # and probe answered, no wrong status, the
                                              # descriptors back where they started
Numbers depend on the machine and its load; --check asserts none of them.
"""
import argparse
import collections
import json
import multiprocessing
import os
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WINDOW_MIN = 2.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def example(name):
    with open(os.path.join(ROOT, "examples/requests", name), "rb") as f:
        return f.read()


def request(method, path, body=b"", keep_alive=True, extra=b""):
    head = (f"{method} {path} HTTP/1.1\r\nHost: troupe\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n").encode() + extra
    if not keep_alive:
        head += b"Connection: close\r\n"
    return head + b"\r\n" + body


class Reader:
    """Reads one response at a time off a socket; status None when the connection ended first."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def response(self):
        try:
            while b"\r\n\r\n" not in self.buf:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return None
                self.buf += chunk
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            status = int(head.split(b" ", 2)[1])
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            while len(self.buf) < length:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return None
                self.buf += chunk
            self.buf = self.buf[length:]
            return status
        except OSError:
            return None


def connect(port, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def once(port, data):
    """Sends `data` on a new connection; the status of the answer (None: none came)."""
    try:
        with connect(port) as s:
            try:
                s.sendall(data)
            except OSError:
                pass  # refused early (413, 431): the answer is still there to read
            return Reader(s).response()
    except OSError:
        return None


def paced(rate, stop_at):
    """Yields the start time of each call at `rate` a second until `stop_at`."""
    t = time.monotonic()
    while t < stop_at:
        now = time.monotonic()
        if t > now:
            time.sleep(t - now)
        yield t
        t += 1.0 / rate


# ---- traffic: each function runs in its own process and puts its records on `out` -----------
FILTERS = [example("01-filter-8gpu-nvlink.json"), example("03-filter-4gpu.json"), example("02-filter-h100-only.json")]
PRIORITIZE = example("03-prioritize-4gpu.json")


def scheduler(port, rate, stop_at, out):
    records, sock, reader, reconnects, n = [], None, None, 0, 0
    for start in paced(rate, stop_at):
        body = PRIORITIZE if n % 4 == 3 else FILTERS[n % 3]
        path = "/prioritize" if n % 4 == 3 else "/filter"
        n += 1
        status = None
        for attempt in range(2):  # a kept-alive connection closed by the server: one new try
            try:
                if sock is None:
                    sock = connect(port)
                    reader = Reader(sock)
                sock.sendall(request("POST", path, body))
                status = reader.response()
            except OSError:
                status = None
            if status is not None:
                break
            if sock is not None:
                sock.close()
            sock = None
            reconnects += attempt == 0
        records.append(("scheduler", start, time.monotonic() - start, status, 200))
    if sock is not None:
        sock.close()
    out.put({"records": records, "reconnects": reconnects})


INVALID = [
    (request("POST", "/filter", b'{"Pod": {"metadata": ', keep_alive=False), 400),
    (request("GET", "/filter", keep_alive=False), 405),
    (request("POST", "/nope", b"{}", keep_alive=False), 404),
    (b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n", 413),
    (request("GET", "/healthz", keep_alive=False, extra=b"X-Big: " + b"a" * (100 << 10) + b"\r\n"), 431),
    (b"NOT A REQUEST\r\n\r\n", 400),
]


def churn(port, rate, stop_at, out):
    records, n = [], 0
    for start in paced(rate, stop_at):
        n += 1
        if n % 2 == 0:
            status = once(port, request("POST", "/filter", FILTERS[n % 3], False))
            records.append(("churn", start, time.monotonic() - start, status, 200))
        elif n % 14 == 13:
            # A body the client gives up on halfway: no answer to read.
            try:
                with connect(port) as s:
                    s.sendall(request("POST", "/filter", FILTERS[0], False)[:-200])
            except OSError:
                pass
        else:
            data, want = INVALID[(n // 2) % len(INVALID)]
            records.append(("invalid", start, None, once(port, data), want))
    out.put({"records": records})


def flood(ports, per_port, rate, stop_at, out):
    """Holds `per_port` silent connections and 20 slow headers on each port; reopens what the
    server closes, at most `rate` a second (each reopen past the cap closes another)."""
    sel = selectors.DefaultSelector()
    opened, reopened = 0, 0

    def open_one(port, slow):
        nonlocal opened
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            return False
        s.setblocking(False)
        if slow:
            s.send(b"G")
        sel.register(s, selectors.EVENT_READ, (port, slow))
        opened += 1
        return True

    for port in ports:
        for _ in range(per_port):
            open_one(port, False)
        for _ in range(20):
            open_one(port, True)
    last_drip = time.monotonic()
    pending = collections.deque()  # closed by the server, to reopen (oldest first)
    tokens, last = 0.0, time.monotonic()
    while time.monotonic() < stop_at:
        now = time.monotonic()
        tokens = min(rate / 10.0, tokens + (now - last) * rate)
        last = now
        while pending and tokens >= 1 and open_one(*pending[0]):
            pending.popleft()
            tokens -= 1
            reopened += 1
        for key, _ in sel.select(timeout=0.01):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                continue
            sel.unregister(s)
            s.close()
            pending.append(key.data)
        if time.monotonic() - last_drip >= 1.0:  # the slow headers' next byte
            last_drip = time.monotonic()
            for key in list(sel.get_map().values()):
                if key.data[1]:
                    try:
                        key.fileobj.send(b"E")
                    except OSError:
                        pass
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    out.put({"records": [], "flood_opened": opened, "flood_reopened": reopened})


def probes(metrics_port, stop_at, out):
    records, n = [], 0
    for start in paced(10, stop_at):
        n += 1
        path = "/metrics" if n % 10 == 0 else "/healthz"
        status = once(metrics_port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        records.append(("probe" if path == "/healthz" else "scrape", start, time.monotonic() - start, status, 200))
    out.put({"records": records})


# ---- the server ------------------------------------------------------------------------------
def rss_mib(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def percentile(values, p):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * len(values) + 0.5)) - 1)]


def window_stats(records, samples, lo, hi):
    def lat(kind):
        return [r[2] * 1000 for r in records if r[0] == kind and lo <= r[1] < hi and r[2] is not None and r[3] == 200]
    in_window = [s for s in samples if lo <= s[0] < hi] or samples[-1:]
    return {
        "verb_p50_ms": percentile(lat("scheduler"), 50), "verb_p99_ms": percentile(lat("scheduler"), 99),
        "churn_p99_ms": percentile(lat("churn"), 99), "probe_p99_ms": percentile(lat("probe"), 99),
        "rss_mib": max(s[1] for s in in_window), "fds": max(s[2] for s in in_window),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.environ.get("TROUPE_BINARY", os.path.join(ROOT, "build/troupe")))
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=200, help="kept-alive verb calls a second")
    ap.add_argument("--flood", type=int, default=1500, help="silent connections held on each port")
    ap.add_argument("--flood-rate", type=float, default=1000, help="flood connections reopened a second")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--check", action="store_true", help="fail on a lost valid call or probe, a wrong status, "
                    "or descriptors not back at the start (CI smoke)")
    args = ap.parse_args()

    needed = 2 * (args.flood + 20) + 512
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        print(f"soak: SKIPPED: the hard open-file limit {hard} is below the {needed} descriptors the flood needs "
              f"(raise ulimit -Hn or lower --flood)")
        return 0
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    port, metrics_port = free_port(), free_port()
    workdir = tempfile.mkdtemp(prefix="troupe-soak-")
    log = open(os.path.join(workdir, "serve.log"), "wb")
    proc = subprocess.Popen([args.binary, "serve", "--listen", f"127.0.0.1:{port}", "--metrics-listen",
                             f"127.0.0.1:{metrics_port}", "--cluster", os.path.join(ROOT, "examples/cluster.yaml"),
                             "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while once(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                print(f"soak: troupe serve did not start; see {log.name}")
                return 1
            time.sleep(0.1)
        time.sleep(0.5)
        before = {"rss_mib": rss_mib(proc.pid), "fds": open_fds(proc.pid)}

        t0 = time.monotonic()
        stop_at = t0 + args.seconds
        out = multiprocessing.Queue()
        workers = [
            multiprocessing.Process(target=scheduler, args=(port, args.rate / 2, stop_at, out)),
            multiprocessing.Process(target=scheduler, args=(port, args.rate / 2, stop_at, out)),
            multiprocessing.Process(target=churn, args=(port, args.rate / 2, stop_at, out)),
            multiprocessing.Process(target=flood, args=([port, metrics_port], args.flood, args.flood_rate, stop_at, out)),
            multiprocessing.Process(target=probes, args=(metrics_port, stop_at, out)),
        ]
        for w in workers:
            w.start()
        samples = []
        while time.monotonic() < stop_at and proc.poll() is None:
            samples.append((time.monotonic(), rss_mib(proc.pid), open_fds(proc.pid)))
            time.sleep(1.0)
        results = [out.get(timeout=120) for _ in workers]
        for w in workers:
            w.join(30)
        alive = proc.poll() is None
        time.sleep(2.0)  # the server sees every client's close
        after = {"rss_mib": rss_mib(proc.pid), "fds": open_fds(proc.pid)} if alive else {}
        metrics = b""
        if alive:
            with connect(metrics_port) as s:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    metrics += chunk
    finally:
        if proc.poll() is None:
            proc.terminate()
            code = proc.wait(30)
        else:
            code = proc.returncode
        log.close()

    records = [r for res in results for r in res["records"]]
    w = max(WINDOW_MIN, args.seconds / 6)
    start_w = window_stats(records, samples, t0, t0 + w)
    end_w = window_stats(records, samples, stop_at - w, stop_at)
    wrong = [r for r in records if r[3] != r[4]]
    lost = {k: sum(1 for r in wrong if r[0] == k) for k in ("scheduler", "churn", "probe", "scrape", "invalid")}
    closed = {}
    for line in metrics.decode("utf-8", "replace").splitlines():
        if line.startswith("troupe_http_connections_closed_total{") and not line.endswith(" 0"):
            closed[line.split("{", 1)[1].split("}")[0]] = int(float(line.rsplit(" ", 1)[1]))
    report = {
        "seconds": args.seconds, "window_s": w, "before": before, "start": start_w, "end": end_w, "after": after,
        "calls": {k: sum(1 for r in records if r[0] == k) for k in ("scheduler", "churn", "invalid", "probe", "scrape")},
        "wrong": lost, "reconnects": sum(res.get("reconnects", 0) for res in results),
        "flood_reopened": sum(res.get("flood_reopened", 0) for res in results),
        "closed_by_server": closed, "exit_code": code,
        "samples": [(round(t - t0, 1), round(r, 1), n) for t, r, n in samples],
        "load_average": os.getloadavg(), "cpus": os.cpu_count(),
    }

    def fmt(v, unit=""):
        return "-" if v is None else f"{v:.1f}{unit}"
    print(f"soak: {args.seconds:.0f} s, windows of {w:.0f} s; load average {report['load_average'][0]:.1f} "
          f"on {report['cpus']} CPUs")
    print(f"  calls: {report['calls']}; wrong or lost: {lost}")
    print(f"  kept-alive connections reopened: {report['reconnects']}; flood connections reopened: "
          f"{report['flood_reopened']}")
    print(f"  closed by the server: {closed}")
    print("  |        | RSS MiB | open fds | verb p50 | verb p99 | new-connection filter p99 | /healthz p99 |")
    print(f"  | before | {before['rss_mib']:.1f} | {before['fds']} | | | | |")
    for name, s in (("start", start_w), ("end", end_w)):
        print(f"  | {name:6} | {s['rss_mib']:.1f} | {s['fds']} | {fmt(s['verb_p50_ms'], ' ms')} | "
              f"{fmt(s['verb_p99_ms'], ' ms')} | {fmt(s['churn_p99_ms'], ' ms')} | {fmt(s['probe_p99_ms'], ' ms')} |")
    if after:
        print(f"  | after  | {after['rss_mib']:.1f} | {after['fds']} | | | | |")
    step = max(1, len(samples) // 12)
    print("  RSS MiB / fds over time: " + ", ".join(f"{t - t0:.0f} s {r:.1f}/{n}" for t, r, n in samples[::step]))
    print(f"  troupe serve exited with {code} after SIGTERM")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)

    if args.check:
        problems = []
        if not alive:
            problems.append("troupe serve died during the soak")
        if code != 0:
            problems.append(f"troupe serve exited with {code} (a sanitizer report?); see {log.name}")
        if any(lost.values()):
            bad = [r for r in wrong][:5]
            problems.append(f"wrong or lost answers {lost}, e.g. {[(r[0], r[3], r[4]) for r in bad]}")
        if after and after["fds"] > before["fds"] + 2:
            problems.append(f"{after['fds']} descriptors open after the soak, {before['fds']} before")
        for p in problems:
            print(f"soak: FAIL: {p}")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
