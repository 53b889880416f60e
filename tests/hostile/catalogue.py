#!/usr/bin/env python3
"""The hostile-input catalogue: every attack of the security review against a running
`troupe serve`, over raw sockets.

For each input it checks
  - the HTTP status (or that the server closed the connection, where that is the answer),
  - that the error names the problem,
  - that /healthz answers during the attack and right after it, and the process is alive,
  - that peak RSS stays under the bound (VmHWM, reset before each input; --rss-limit-mib).

Inputs whose fix lives on another branch are in PENDING (see the bottom of the file): they run,
and report XFAIL/XPASS without failing the suite unless --strict-pending is given.

Usage:
  tests/hostile/catalogue.py --binary build/troupe [--only M1,M3] [--report out.json]
  tests/hostile/catalogue.py --binary OLD --legacy --report-only     # measure an old build
See docs/hostile-inputs.md for what each input is and why the bound is what it is.
"""
import argparse
import json
import os
import resource
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MIB = 1 << 20

# The limits the catalogue's server runs with. The size limits are the defaults; the timeouts
# are shortened so the slow-client inputs take seconds, not minutes.
TEST_CONFIG = """\
limits:
  headerTimeoutSeconds: 2
  readTimeoutSeconds: 4
  idleTimeoutSeconds: 3
  writeTimeoutSeconds: 10
  maxConnections: 200
"""


# ---- HTTP over raw sockets -------------------------------------------------------------------
class Response:
    def __init__(self, status, headers, body, closed):
        self.status = status  # None: the server closed (or timed out) without an answer
        self.headers = headers
        self.body = body
        self.closed = closed  # the server closed the connection after (or instead of) answering

    def text(self):
        return self.body.decode("utf-8", "replace")

    def __repr__(self):
        return f"{self.status} {self.text()[:160]!r}{' (closed)' if self.closed else ''}"


def connect(port, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def request(method, path, body=b"", headers=None, version="HTTP/1.1", length=True):
    lines = [f"{method} {path} {version}".encode(), b"Host: 127.0.0.1"]
    for k, v in (headers or {}).items():
        lines.append(k.encode() + b": " + (v if isinstance(v, bytes) else str(v).encode()))
    if length and body is not None and "Content-Length" not in (headers or {}) and \
            "Transfer-Encoding" not in (headers or {}):
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


class Reader:
    """Reads responses off one connection, keeping what follows an answer for the next one."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def more(self, deadline):
        self.sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = self.sock.recv(65536)
        self.buf += chunk
        return bool(chunk)

    def response(self, timeout=10.0):
        """One response; Response(None, ...) when the connection ends or times out first."""
        deadline = time.monotonic() + timeout
        try:
            while b"\r\n\r\n" not in self.buf:
                if time.monotonic() > deadline or not self.more(deadline):
                    return Response(None, {}, self.buf, time.monotonic() <= deadline)
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            status = int(lines[0].split()[1])
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(b":")
                headers[k.strip().lower().decode()] = v.strip().decode("latin-1")
            if status == 100:  # 100 Continue: the real answer follows
                return self.response(max(0.01, deadline - time.monotonic()))
            n = int(headers.get("content-length", "-1"))
            closed = headers.get("connection", "").lower() == "close"
            if n < 0:  # no length: the body runs to the end of the connection
                while self.more(deadline):
                    pass
                n, closed = len(self.buf), True
            while len(self.buf) < n:
                if not self.more(deadline):
                    body, self.buf = self.buf, b""
                    return Response(status, headers, body, True)
            body, self.buf = self.buf[:n], self.buf[n:]
            return Response(status, headers, body, closed)
        except socket.timeout:
            return Response(None, {}, self.buf, False)
        except (ConnectionResetError, BrokenPipeError):
            return Response(None, {}, self.buf, True)


def read_response(sock, timeout=10.0):
    return Reader(sock).response(timeout)


def exchange(port, data, timeout=10.0):
    """Sends `data` on a fresh connection and reads one response."""
    with connect(port, timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return read_response(s, timeout)


def post(port, path, body, headers=None, timeout=30.0):
    return exchange(port, request("POST", path, body, headers), timeout)


def closed_by_server(sock, within):
    """Whether the server closes `sock` within `within` seconds (any bytes it sends are read)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError, OSError):
            return True
    return False


def send_while_reading(port, head, body_iter, timeout=30.0):
    """Sends `head`, then the parts of `body_iter`, while another thread reads the answer:
    a server that answers early (413) and closes must be seen doing so."""
    s = connect(port, timeout)
    result = {}

    def reader():
        result["response"] = read_response(s, timeout)
    t = threading.Thread(target=reader)
    t.start()
    sent = 0
    try:
        s.sendall(head)
        for part in body_iter:
            if "response" in result:
                break
            s.sendall(part)
            sent += len(part)
    except (BrokenPipeError, ConnectionResetError, socket.timeout, OSError):
        pass
    t.join(timeout)
    s.close()
    r = result.get("response") or Response(None, {}, b"", True)
    r.sent = sent
    return r


# ---- the server under test -------------------------------------------------------------------
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, legacy, workdir, extra_env=None):
        self.port, self.metrics_port = free_port(), free_port()
        args = [binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--metrics-listen",
                f"127.0.0.1:{self.metrics_port}", "--cluster", os.path.join(ROOT, "examples/cluster.yaml"),
                "--log-level", "error"]
        if not legacy:
            config = os.path.join(workdir, "config.yaml")
            with open(config, "w", encoding="utf-8") as f:
                f.write(TEST_CONFIG)
            args += ["--config", config]
        self.log = open(os.path.join(workdir, "serve.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(extra_env or {})))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"troupe serve exited with {self.proc.returncode}; see {self.log.name}")
            try:
                if healthz(self.port)[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("troupe serve did not answer /healthz within 20 s")

    def alive(self):
        return self.proc.poll() is None

    def rss_mib(self, field="VmRSS"):
        try:
            with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return 0.0

    def reset_peak(self):
        """Resets VmHWM to the current RSS; False when the kernel does not allow it."""
        try:
            with open(f"/proc/{self.proc.pid}/clear_refs", "w", encoding="ascii") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def stop(self):
        """Stops the server with SIGTERM (a clean drain); its exit code, or None if it had to be
        killed. A sanitizer build exits non-zero when it found an error or a leak."""
        code = self.proc.poll()
        if code is None:
            self.proc.terminate()
            try:
                code = self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                code = None
        self.log.close()
        return code

    def log_tail(self, lines=30):
        with open(self.log.name, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")


def healthz(port, timeout=5.0):
    start = time.monotonic()
    try:
        r = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout)
    except OSError:
        return None, time.monotonic() - start
    return r.status, time.monotonic() - start


class Watch:
    """While an input runs: polls /healthz (latency, failures) and samples RSS."""

    def __init__(self, server, port):
        self.server, self.port = server, port
        self.stop_flag = threading.Event()
        self.latencies, self.failures, self.rss = [], 0, 0.0
        self.peak_reset = server.reset_peak()
        self.threads = [threading.Thread(target=self.poll), threading.Thread(target=self.sample)]
        for t in self.threads:
            t.start()

    def poll(self):
        while True:  # at once, then every 50 ms until the input is done
            status, latency = healthz(self.port, 2.0)
            if status == 200:
                self.latencies.append(latency)
            else:
                self.failures += 1
            if self.stop_flag.wait(0.05):
                return

    def sample(self):
        while not self.stop_flag.wait(0.01):
            self.rss = max(self.rss, self.server.rss_mib())

    def finish(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join()
        hwm = self.server.rss_mib("VmHWM") if self.peak_reset else 0.0
        return max(self.rss, hwm)


# ---- payloads --------------------------------------------------------------------------------
def example(name):
    with open(os.path.join(ROOT, "examples/requests", name), "rb") as f:
        return f.read()


FILTER = example("01-filter-8gpu-nvlink.json")
BIND = example("07-bind-4gpu.json")


def pod(name, gpus="1", annotations=None, containers=None, uid=None):
    return {"metadata": {"name": name, "namespace": "hostile", "uid": uid or "uid-" + name,
                         "annotations": annotations or {}},
            "spec": {"schedulerName": "troupe-scheduler",
                     "containers": containers or [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
            "status": {"phase": "Pending"}}


ALL_NODES = ["h100-0", "h100-1", "h100-2", "h100-3", "a100-0", "a100-1", "l40s-0", "l40s-1", "a10-0", "a10-1",
             "v100-dgx1"]


def filter_body(p, nodes=None):
    return json.dumps({"Pod": p, "Nodes": None, "NodeNames": nodes or ALL_NODES}).encode()


def bind_body(name, node, uid=None, ns="hostile"):
    return json.dumps({"PodName": name, "PodNamespace": ns, "PodUID": uid or "uid-" + name,
                       "Node": node}).encode()


def nested(depth, open_=b"[", close=b"]", inner=b"1"):
    return open_ * depth + inner + close * depth


def with_member(doc, member):
    """`doc` (a JSON object's bytes) with `"x": member` added as its first member."""
    doc = doc.strip()
    return b'{"x":' + member + b"," + doc[1:]


# ---- the catalogue ---------------------------------------------------------------------------
class Case:
    def __init__(self, cid, what, run, status=None, says=(), check=None, closes=False, branch=None,
                 prepare=None, probe_port="verbs"):
        self.cid, self.what, self.run = cid, what, run
        self.prepare = prepare  # builds a large payload before the clock starts (ctx.payload)
        self.probe_port = probe_port  # where /healthz is polled during the input: verbs or metrics
        self.status = status  # an int, a tuple of ints, or None (no answer expected: closes)
        self.says = says  # substrings the answer must contain (case-insensitive)
        self.check = check  # extra check: f(result) -> error text or None
        self.closes = closes  # the server must close the connection
        self.branch = branch  # the branch whose fix this input waits for (PENDING only)


def expect_all(responses, status, says=()):
    bad = [r for r in responses if r.status != status or any(s.lower() not in r.text().lower() for s in says)]
    return None if not bad else f"{len(bad)} of {len(responses)} answers wrong, e.g. {bad[0]!r}"


def many(n, fn):
    out = [None] * n
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, fn(i))) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def m3_concurrent(ctx):
    head = request("POST", "/filter", None, {"Content-Length": "1000000000000", "Content-Type": "application/json"},
                   length=False)
    start = time.monotonic()
    answers = many(16, lambda i: exchange(ctx.port, head, 5.0))
    ctx.note(f"16 answers in {time.monotonic() - start:.2f} s")
    return {"responses": answers, "response": answers[0]}


def chunked_100mib(ctx):
    head = request("POST", "/filter", None, {"Transfer-Encoding": "chunked"}, length=False)
    chunk = b"x" * MIB
    part = hex(len(chunk))[2:].encode() + b"\r\n" + chunk + b"\r\n"
    r = send_while_reading(ctx.port, head, (part for _ in range(100)), 30.0)
    ctx.note(f"sent {r.sent // MIB} MiB of 100 before the answer")
    return {"response": r}


def oversized_declared(ctx):
    body = b"x" * (70 * MIB)
    head = request("POST", "/filter", None, {"Content-Length": str(len(body))}, length=False)
    r = send_while_reading(ctx.port, head, (body[i:i + MIB] for i in range(0, len(body), MIB)), 30.0)
    ctx.note(f"sent {r.sent // MIB} MiB of 70 before the answer")
    return {"response": r}


def header_line(ctx, size, terminated):
    """GET /healthz with one header line of `size` bytes, sent 1 MiB at a time."""
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "
    tail = b"\r\n\r\n" if terminated else b""
    parts = (b"a" * min(MIB, size - i) for i in range(0, size, MIB))
    r = send_while_reading(ctx.port, head, list(parts) + [tail], 20.0)
    ctx.note(f"sent {r.sent // MIB} MiB of {size // MIB} before the answer")
    return {"response": r}


def many_headers(ctx):
    headers = b"".join(b"X-H-%05d: v\r\n" % i for i in range(10000))
    return {"response": exchange(ctx.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")}


def slowloris(ctx):
    """32 connections send headers and 32 send a declared 100000-byte body, 1 byte a second."""
    socks = []
    for i in range(64):
        s = connect(ctx.port)
        if i % 2 == 0:
            s.sendall(b"G")
        else:
            s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
        socks.append(s)
    start, open_ = time.monotonic(), set(range(64))
    closed_at = {}
    while open_ and time.monotonic() - start < ctx.slow_window:
        for i in list(open_):
            try:
                socks[i].sendall(b"E" if i % 2 == 0 else b" ")
                socks[i].settimeout(0.001)
                try:
                    if socks[i].recv(4096) == b"":
                        raise ConnectionResetError
                except socket.timeout:
                    pass
            except (BrokenPipeError, ConnectionResetError, OSError):
                open_.discard(i)
                closed_at[i] = time.monotonic() - start
        time.sleep(1.0)
    for s in socks:
        s.close()
    ctx.note(f"{len(closed_at)} of 64 closed by the server within {ctx.slow_window:.0f} s" +
             (f" (last after {max(closed_at.values()):.1f} s)" if closed_at else ""))
    return {"closed": len(closed_at), "response": Response(None, {}, b"", bool(closed_at))}


def idle_keepalive(ctx):
    s = connect(ctx.port)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    first = read_response(s)
    closed = closed_by_server(s, ctx.slow_window)
    s.close()
    ctx.note(f"first answer {first.status}; idle connection closed by the server: {closed}")
    return {"response": Response(first.status, {}, first.body, closed)}


def connection_cap(ctx):
    """maxConnections + 20 idle connections: the 20 oldest are closed to make room for the newest
    (and for the probes polled on the same port meanwhile), and the port keeps serving."""
    socks = [connect(ctx.port) for _ in range(ctx.max_connections + 20)]
    time.sleep(0.5)
    readable, _, _ = select.select(socks, [], [], 0.1)
    closed = {i for i, s in enumerate(socks) if s in readable and closed_by_server(s, 0.05)}
    r = post(ctx.port, "/filter", FILTER)
    for s in socks:
        s.close()
    time.sleep(0.3)
    oldest = set(range(20)) <= closed
    newest_held = not closed & set(range(len(socks) - 20, len(socks)))
    ctx.note(f"{len(closed)} of {len(socks)} closed at once (cap {ctx.max_connections}); the 20 oldest among "
             f"them: {oldest}; the 20 newest held: {newest_held}")
    return {"closed": len(closed), "oldest": oldest, "newest_held": newest_held, "response": r}


def open_file_room(needed):
    """Raises this process's soft open-file limit to the hard one; whether `needed` descriptors fit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard == resource.RLIM_INFINITY or hard >= needed


FLOOD_CONNECTIONS = 3000


def flood(ctx, port_name):
    """3,000 connections that never send a byte, held on one port: 10 of 10 /healthz on that
    port answer 200 (the Watch polls it every 50 ms meanwhile) and a filter on the verbs' port
    succeeds."""
    port = ctx.server.metrics_port if port_name == "metrics" else ctx.port
    if not open_file_room(FLOOD_CONNECTIONS + 512):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        ctx.note(f"SKIPPED: the hard open-file limit {hard} is below {FLOOD_CONNECTIONS + 512} (raise ulimit -Hn)")
        return {"response": Response(200, {}, b"", False), "skipped": True}
    socks = []
    try:
        start = time.monotonic()
        for _ in range(FLOOD_CONNECTIONS):
            socks.append(connect(port))
        opened = time.monotonic() - start
        time.sleep(0.5)  # the server takes them all
        probes = [healthz(port) for _ in range(10)]
        r = post(ctx.port, "/filter", FILTER)
        answered = sum(1 for status, _ in probes if status == 200)
        slowest = max(latency for _, latency in probes) * 1000
        ctx.note(f"{len(socks)} idle connections opened in {opened:.2f} s; /healthz {answered} of 10 "
                 f"(slowest {slowest:.1f} ms); filter {r.status}")
        return {"response": r, "answered": answered}
    finally:
        for s in socks:
            s.close()
        time.sleep(0.3)


def pipelined(ctx):
    with connect(ctx.port) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        reader = Reader(s)
        a, b = reader.response(5), reader.response(5)
    ctx.note(f"answers: {a.status}, {b.status}")
    return {"response": a, "responses": [a, b]}


def budget(ctx):
    """Four 50 MiB bodies at once: the in-flight body budget admits what fits, the rest get 503."""
    answers = many(4, lambda i: post(ctx.port, "/filter", ctx.payload, timeout=60))
    ctx.note("answers: " + ", ".join(str(r.status) for r in answers))
    return {"responses": answers, "response": answers[0]}


def declared_not_sent(ctx):
    """Two connections declare 64 MiB bodies (the whole default budget) and send 1 KiB: the in-flight budget counts what
    arrived, so an ordinary filter beside them is still served."""
    head = request("POST", "/filter", None, {"Content-Length": str(64 * MIB)}, length=False)
    socks = [connect(ctx.port) for _ in range(2)]
    for s in socks:
        s.sendall(head + b"{" * 1024)
    time.sleep(0.2)
    r = post(ctx.port, "/filter", FILTER)
    for s in socks:
        s.close()
    return {"response": r}


def concurrent_binds(ctx, gpus, node, n, prefix, milli=None):
    names = [f"{prefix}-{i}" for i in range(n)]
    for name in names:
        annotations = {"troupe.dev/gpu-milli": str(milli)} if milli else {}
        p = pod(name, gpus if not milli else "0", annotations)
        if milli:
            p["spec"]["containers"][0]["resources"] = {}
        r = post(ctx.port, "/filter", filter_body(p, [node]))
        if r.status != 200 or node not in json.loads(r.body).get("NodeNames", []):
            return {"response": r, "error": f"filter of {name} did not pass {node}: {r!r}"}
    answers = many(n, lambda i: post(ctx.port, "/bind", bind_body(names[i], node)))
    ok = sum(1 for r in answers if r.status == 200 and json.loads(r.body).get("Error") == "")
    ctx.note(f"{ok} of {n} binds succeeded")
    return {"response": answers[0], "succeeded": ok, "responses": answers}


def concurrent_filters(ctx):
    answers = many(200, lambda i: post(ctx.port, "/filter", FILTER))
    return {"responses": answers, "response": answers[0]}


def l3_retention(ctx):
    body = ctx.payload
    answers = [post(ctx.port, "/bind", body) for _ in range(80)]
    ctx.note(f"RSS after 80 requests: {ctx.server.rss_mib():.0f} MiB")
    return {"response": answers[-1], "responses": answers, "rss_after": ctx.server.rss_mib()}


def huge_node_names(ctx):
    start = time.monotonic()
    r = post(ctx.port, "/filter", ctx.payload)
    ctx.note(f"{len(r.body) // 1024} KiB answer in {time.monotonic() - start:.2f} s")
    return {"response": r}


def plain(status, says=()):
    return {"status": status, "says": says}


def C(cid, what, run, **kw):
    return Case(cid, what, run, **kw)


def P(cid, what, path, payload, **kw):
    """POST `path` with the body `payload()` builds (before the measurement starts)."""
    return Case(cid, what, lambda ctx: {"response": post(ctx.port, path, ctx.payload, timeout=60)},
                prepare=payload, **kw)


def catalogue():
    bad_json = ("not valid json",)
    return [
        # Body size and framing (review M3, M4, probes 27-33, 127-129).
        C("M3", "16 concurrent POST /filter, Content-Length 10^12, no body", m3_concurrent, status=413,
          says=("maxBodyBytes",), check=lambda res: expect_all(res["responses"], 413, ("maxBodyBytes",))),
        C("P30", "Content-Length 10^12 and one body byte: 413 at once",
          lambda ctx: {"response": exchange(ctx.port, request("POST", "/filter", None,
                                                              {"Content-Length": "1000000000000"}, length=False) +
                                            b"{", 5.0)}, status=413, says=("maxBodyBytes",)),
        C("P29", "70 MiB body with its Content-Length (over 64 MiB): 413 before the upload", oversized_declared,
          status=413, says=("maxBodyBytes",)),
        C("M4", "100 MiB chunked body: 413 once 64 MiB are read", chunked_100mib, status=413,
          says=("maxBodyBytes",)),
        P("P27", "50 MiB of 'x' with a Content-Length", "/filter", lambda: b"x" * (50 * MIB), status=400,
          says=bad_json),
        P("P28", "01-filter + a 50 MiB annotation value", "/filter",
          lambda: filter_body(pod("big-note", "1", {"note": "y" * (50 * MIB)})), status=200),
        C("BUDGET", "4 concurrent 50 MiB bodies: what is over the in-flight budget gets 503", budget,
          prepare=lambda: b"x" * (50 * MIB),
          check=lambda res: None if all(r.status in (400, 503) for r in res["responses"]) and any(
              r.status == 400 for r in res["responses"]) and all(
              "maxBodyBytesInFlight" in r.text() for r in res["responses"] if r.status == 503)
          else f"answers {[repr(r) for r in res['responses']]}"),
        C("HOLD", "2 connections declare 64 MiB and send 1 KiB; a filter beside them", declared_not_sent,
          status=200),
        C("P127", "Content-Length: -1", lambda ctx: {"response": exchange(ctx.port, request(
            "POST", "/filter", None, {"Content-Length": "-1"}, length=False) + b"{}", 5.0)},
          status=400, says=("Content-Length",)),
        C("P128", "Content-Length: abc", lambda ctx: {"response": exchange(ctx.port, request(
            "POST", "/filter", None, {"Content-Length": "abc"}, length=False) + b"{}", 5.0)},
          status=400, says=("Content-Length",)),
        C("P129", "Content-Length and Transfer-Encoding: chunked together", lambda ctx: {"response": exchange(
            ctx.port, request("POST", "/filter", None, {"Content-Length": "4", "Transfer-Encoding": "chunked"},
                              length=False) + b"4\r\n{}{}\r\n0\r\n\r\n", 5.0)}, status=400),
        # Headers (M5, probes 130-139).
        C("M5", "GET /healthz with a 200 MiB header line: 431 after the header limit",
          lambda ctx: header_line(ctx, 200 * MIB, True), status=431, says=("header",)),
        C("P139", "a 200 MiB header line, never terminated", lambda ctx: header_line(ctx, 200 * MIB, False),
          status=431, says=("header",)),
        C("P130", "one 1 MiB header", lambda ctx: header_line(ctx, MIB, True), status=431, says=("header",)),
        C("P131", "10,000 headers (140 KB)", many_headers, status=431, says=("header",)),
        C("P132", "HTTP/1.0 without Host", lambda ctx: {"response": exchange(
            ctx.port, b"GET /healthz HTTP/1.0\r\n\r\n", 5.0)}, status=200),
        C("P133", "a TLS ClientHello on the plain port", lambda ctx: {"response": exchange(
            ctx.port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64, 5.0)}, status=400),
        C("P134", "POST http://evil/filter (absolute form)", lambda ctx: {"response": exchange(
            ctx.port, request("POST", "http://evil/filter", FILTER), 5.0)}, status=200),
        C("P135", "raw bytes in the request target", lambda ctx: {"response": exchange(
            ctx.port, b"GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n", 5.0)}, status=(400, 404)),
        C("P136", "raw bytes as the method", lambda ctx: {"response": exchange(
            ctx.port, b"\xff\xfe /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 5.0)}, status=400),
        C("P138", "two pipelined requests on one connection", pipelined,
          check=lambda res: None if [r.status for r in res["responses"]] == [200, 200] else
          f"answers {res['responses']}"),
        # Slow and idle clients (H1).
        C("H1", "64 slowloris connections (32 slow headers, 32 slow bodies), 1 byte a second", slowloris,
          check=lambda res: None if res["closed"] == 64 else f"only {res['closed']} of 64 closed"),
        C("IDLE", "a keep-alive connection left idle past idleTimeout", idle_keepalive, status=200, closes=True),
        C("CAP", "maxConnections + 20 idle connections: the oldest closed, the port keeps serving", connection_cap,
          status=200, check=lambda res: None if res["closed"] >= 20 and res["oldest"] and res["newest_held"] else
          f"{res['closed']} closed; the oldest 20 among them: {res['oldest']}; the newest held: {res['newest_held']}"),
        C("FLOOD-M", "3,000 idle connections on --metrics-listen: probes there answered", lambda ctx: flood(
            ctx, "metrics"), status=200, probe_port="metrics",
          check=lambda res: None if res.get("skipped") or res["answered"] == 10 else f"{res['answered']} of 10"),
        C("FLOOD-V", "3,000 idle connections on --listen: probes and a filter answered", lambda ctx: flood(
            ctx, "verbs"), status=200,
          check=lambda res: None if res.get("skipped") or res["answered"] == 10 else f"{res['answered']} of 10"),
        # JSON nesting (M1, probes 34-44) and retention (L3).
        P("M1", "/bind + \"x\": a 10,000,000-deep array (20 MB)", "/bind",
          lambda: with_member(BIND, nested(10000000)), status=400, says=("64", "nest")),
        P("P40", "01-filter with Pod.metadata.deep = a 1,000,000-deep array", "/filter",
          lambda: FILTER.replace(b'"metadata": {', b'"metadata": {"deep": ' + nested(1000000) + b",", 1),
          status=400, says=("64", "nest")),
        P("P42", "07-bind + a 1,000,000-deep array", "/bind", lambda: with_member(BIND, nested(1000000)),
          status=400, says=("64", "nest")),
        P("P43", "/preempt with a 1,000,000-deep object", "/preempt",
          lambda: with_member(json.dumps({"Pod": pod("pre")}).encode(), nested(1000000, b'{"a":', b"}")),
          status=400, says=("64", "nest")),
        P("P34", "a body that is a 10,000-deep array", "/filter", lambda: nested(10000), status=400),
        C("DEPTH64", "nesting of exactly 64 levels is accepted", lambda ctx: {"response": post(
            ctx.port, "/bind", with_member(BIND, nested(63)))}, status=200),
        C("DEPTH65", "nesting of 65 levels is refused, naming the limit", lambda ctx: {"response": post(
            ctx.port, "/bind", with_member(BIND, nested(64)))}, status=400, says=("64", "nest")),
        C("L3", "80 x /bind with a 2 MB, 1,000,000-deep body", l3_retention, status=400,
          prepare=lambda: with_member(BIND, nested(1000000)), check=lambda res: expect_all(res["responses"], 400)),
        # Malformed JSON, UTF-8, duplicate keys, huge lists (probes 1-9, 94-107).
        C("P1", "truncated JSON", lambda ctx: {"response": post(ctx.port, "/filter", b'{"Pod": {"metadata": ')},
          status=400, says=bad_json),
        C("P4", "empty body", lambda ctx: {"response": post(ctx.port, "/filter", b"")}, status=400,
          says=("empty",)),
        C("P6", "a JSON array body", lambda ctx: {"response": post(ctx.port, "/filter", b"[]")}, status=400,
          says=("JSON object",)),
        C("P8", "valid body + trailing garbage", lambda ctx: {"response": post(ctx.port, "/filter",
                                                                                FILTER + b"xyz")},
          status=400, says=bad_json),
        C("P99", "raw \\xff\\xfe in a node name", lambda ctx: {"response": post(
            ctx.port, "/filter", FILTER.replace(b'"h100-1"', b'"bad\xff\xfe"'))}, status=400, says=bad_json),
        C("P100", "overlong UTF-8 \\xc0\\xaf in a pod name", lambda ctx: {"response": post(
            ctx.port, "/filter", FILTER.replace(b"llama-8gpu", b"llama\xc0\xaf"))}, status=400, says=bad_json),
        C("P101", "a lone surrogate \\ud800 in a pod name", lambda ctx: {"response": post(
            ctx.port, "/filter", FILTER.replace(b"llama-8gpu", b"llama\\ud800"))}, status=400, says=bad_json),
        C("P103", "raw \\xff in a bind PodName", lambda ctx: {"response": post(
            ctx.port, "/bind", BIND.replace(b"finetune-4gpu", b"p\xff", 1))}, status=400, says=bad_json),
        C("P104", "NodeNames twice: the last wins", lambda ctx: {"response": post(
            ctx.port, "/filter", FILTER.rstrip()[:-1] + b', "NodeNames": ["a10-0"]}')}, status=200,
          check=lambda res: None if json.loads(res["response"].body)["FailedAndUnresolvableNodes"] == {
              "a10-0": "troupe: node has fewer GPUs in total than the pod's 8"} and json.loads(
              res["response"].body)["NodeNames"] == [] else f"answer {res['response']!r}"),
        P("P94", "a pod with 10,000 containers", "/filter", lambda: filter_body(pod("wide", containers=[
            {"name": f"c{i}", "resources": {"limits": {"nvidia.com/gpu": "1" if i == 0 else "0"}}}
            for i in range(10000)])), status=200),
        C("P98", "100,000 unknown NodeNames", huge_node_names, status=200,
          prepare=lambda: filter_body(pod("many-names"), ["ghost-%06d" % i for i in range(100000)])),
        C("P13", "GET /filter", lambda ctx: {"response": exchange(ctx.port, request("GET", "/filter"))},
          status=405, says=("POST",)),
        C("P20", "POST /nope", lambda ctx: {"response": post(ctx.port, "/nope", b"{}")}, status=404,
          says=("no such endpoint",)),
        # Concurrency (probes 119-121).
        C("P119", "64 simultaneous binds of 8-GPU pods to h100-0: exactly one succeeds",
          lambda ctx: concurrent_binds(ctx, "8", "h100-0", 64, "race"),
          check=lambda res: res.get("error") or (None if res["succeeded"] == 1 else
                                                 f"{res['succeeded']} succeeded")),
        C("P120", "64 simultaneous binds of gpu-milli 500 pods to a10-0 (4 GPUs): exactly 8 succeed",
          lambda ctx: concurrent_binds(ctx, "0", "a10-0", 64, "share", milli=500),
          check=lambda res: res.get("error") or (None if res["succeeded"] == 8 else
                                                 f"{res['succeeded']} succeeded")),
        C("CONC", "200 concurrent filters on fresh connections", concurrent_filters,
          check=lambda res: expect_all(res["responses"], 200)),
    ] + PENDING


# Inputs whose fix is on another branch: expected to pass once that branch is merged. The lead
# switches them on with --strict-pending (tests/CMakeLists.txt) after the merge.
PENDING = [
    C("I1", "GPU requests 9223372036854775 + 9223372036854775 + 9616m overflow int64", lambda ctx: {
        "response": post(ctx.port, "/filter", filter_body(pod("overflow", containers=[
            {"name": f"c{i}", "resources": {"limits": {"nvidia.com/gpu": q}}}
            for i, q in enumerate(["9223372036854775", "9223372036854775", "9616m"])])))},
      status=200, branch="parse",
      check=lambda res: None if json.loads(res["response"].body)["NodeNames"] == [] else
      f"passed nodes: {json.loads(res['response'].body)['NodeNames']}"),
    C("P83", "troupe.dev/gang-timeout: \".\"", lambda ctx: {"response": post(ctx.port, "/filter", filter_body(
        pod("gt-dot", "1", {"troupe.dev/gang": "gt", "troupe.dev/gang-size": "2", "troupe.dev/gang-timeout": "."})))},
      status=200, says=("gang-timeout",), branch="parse"),
    C("P113", "node annotation gpu-topology with NV99999999999 in a full-node filter", lambda ctx: {
        "response": post(ctx.port, "/filter", json.dumps({
            "Pod": pod("topo", "1"), "NodeNames": None, "Nodes": {"items": [{
                "metadata": {"name": "mat-node", "annotations": {
                    "troupe.dev/gpu-topology": '[["X","NV99999999999"],["NV99999999999","X"]]'}},
                "status": {"allocatable": {"nvidia.com/gpu": "2"}}}]}}).encode())},
      # With --cluster, request bodies never define nodes (the node stays unknown); the parser's
      # reason naming troupe.dev/gpu-topology is checked in tests/unit/adapters/http/hostile_input_test.cc and,
      # in Kubernetes mode, the node watch keeps running (no crash loop).
      status=200, says=("mat-node",), branch="parse"),
    C("P108", "a full-node /filter does not change --cluster node facts", lambda ctx: node_facts_stick(ctx),
      status=200, branch="trust",
      # h100-0 may be busy from earlier inputs (resolvable), but never "no GPUs" (unresolvable).
      check=lambda res: None if "h100-0" not in (json.loads(res["response"].body)["FailedAndUnresolvableNodes"] or {})
      else f"h100-0 lost its GPUs: {res['response']!r}"),
]


def node_facts_stick(ctx):
    poison = json.dumps({"Pod": pod("poison", "1"), "NodeNames": None, "Nodes": {"items": [{
        "metadata": {"name": "h100-0"}, "status": {"allocatable": {"nvidia.com/gpu": "0"}}}]}}).encode()
    post(ctx.port, "/filter", poison)
    return {"response": post(ctx.port, "/filter", filter_body(pod("after-poison", "8"), ["h100-0", "h100-1"]))}


# ---- runner ----------------------------------------------------------------------------------
class Context:
    def __init__(self, server, slow_window, max_connections):
        self.server, self.port, self.slow_window = server, server.port, slow_window
        self.max_connections = max_connections
        self.notes = []

    def note(self, text):
        self.notes.append(text)


def judge(case, result, peak, health, watch, args):
    problems = []
    r = result.get("response")
    if case.status is not None and r is not None:
        wanted = case.status if isinstance(case.status, tuple) else (case.status,)
        if r.status not in wanted:
            problems.append(f"status {r.status}, expected {case.status}: {r!r}")
        for s in case.says:
            if s.lower() not in r.text().lower():
                problems.append(f"the answer does not say {s!r}: {r!r}")
    if case.closes and r is not None and not r.closed:
        problems.append("the server did not close the connection")
    if case.check:
        try:
            err = case.check(result)
        except Exception as e:  # a malformed answer is a failure, not a crash of the catalogue
            err = f"check raised {type(e).__name__}: {e}"
        if err:
            problems.append(err)
    if not health["alive"]:
        problems.append("the server process died")
    elif health["after"] != 200:
        problems.append(f"/healthz after the input answered {health['after']}")
    if watch.failures:
        problems.append(f"/healthz failed {watch.failures} time(s) during the input")
    if args.rss_limit_mib and peak > args.rss_limit_mib:
        problems.append(f"peak RSS {peak:.0f} MiB over {args.rss_limit_mib} MiB")
    if args.latency_limit_ms and watch.latencies and max(watch.latencies) * 1000 > args.latency_limit_ms:
        problems.append(f"/healthz took {max(watch.latencies) * 1000:.0f} ms during the input")
    return problems


def stopped(server, failed, args):
    """Stops `server`; a crash, a hang on SIGTERM or a sanitizer report fails the run."""
    code = server.stop()
    if code != 0 and not args.report_only:
        failed.append("EXIT")
        print(f"[FAIL ] troupe serve (pid {server.proc.pid}) ended with {code} (expected 0 after SIGTERM):\n"
              f"{server.log_tail()}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.environ.get("TROUPE_BINARY", os.path.join(ROOT, "build/troupe")))
    ap.add_argument("--only", help="comma-separated case ids")
    ap.add_argument("--legacy", action="store_true", help="the binary predates the limits config")
    ap.add_argument("--report-only", action="store_true", help="measure and print; never fail")
    ap.add_argument("--report", help="write the results as JSON here")
    ap.add_argument("--rss-limit-mib", type=float, default=256)
    ap.add_argument("--no-rss", action="store_true", help="skip the RSS bound (sanitizer builds)")
    ap.add_argument("--latency-limit-ms", type=float, default=0,
                    help="also fail when /healthz is slower than this during an input (0: off; timing is "
                         "for measurements, not CI)")
    ap.add_argument("--fresh", action="store_true", help="a fresh server for every input (per-input peaks "
                    "without what earlier inputs left behind)")
    ap.add_argument("--strict-pending", action="store_true", help="PENDING inputs must pass too")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server's environment")
    args = ap.parse_args()
    if args.no_rss:
        args.rss_limit_mib = 0
    cases = catalogue()
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if c.cid in wanted]
    env = dict(kv.split("=", 1) for kv in args.env)
    results, failed, start_all = [], [], time.monotonic()
    with tempfile.TemporaryDirectory(prefix="troupe-hostile-") as workdir:
        server = Server(args.binary, args.legacy, workdir, env)
        try:
            print(f"troupe serve pid {server.proc.pid} on 127.0.0.1:{server.port}; RSS at start "
                  f"{server.rss_mib():.0f} MiB", flush=True)
            for case in cases:
                if args.fresh and results:
                    stopped(server, failed, args)
                    server = Server(args.binary, args.legacy, workdir, env)
                ctx = Context(server, slow_window=8.0 if not args.legacy else 12.0, max_connections=200)
                ctx.payload = case.prepare() if case.prepare else None
                before = server.rss_mib()
                watch = Watch(server, server.metrics_port if case.probe_port == "metrics" else server.port)
                t0 = time.monotonic()
                try:
                    result = case.run(ctx)
                except Exception as e:
                    result = {"response": None, "error": f"{type(e).__name__}: {e}"}
                    case_check = case.check
                    case.check = lambda res, c=case_check: res.get("error") or (c(res) if c else None)
                elapsed = time.monotonic() - t0
                peak = watch.finish()
                ctx.payload = None
                status, latency = healthz(server.port)
                health = {"alive": server.alive(), "after": status, "after_ms": latency * 1000}
                problems = judge(case, result, peak, health, watch, args)
                r = result.get("response")
                row = {"id": case.cid, "what": case.what, "status": r.status if r else None,
                       "answer": r.text()[:200] if r else "", "seconds": round(elapsed, 2),
                       "rss_before_mib": round(before, 1), "rss_peak_mib": round(peak, 1),
                       "rss_after_mib": round(server.rss_mib(), 1),
                       "healthz_max_ms": round(max(watch.latencies) * 1000, 1) if watch.latencies else None,
                       "healthz_after_ms": round(health["after_ms"], 1), "healthz_failures": watch.failures,
                       "alive": health["alive"], "notes": ctx.notes, "problems": problems,
                       "pending_branch": case.branch}
                results.append(row)
                verdict = "ok" if not problems else ("XFAIL" if case.branch and not args.strict_pending else "FAIL")
                if case.branch and not problems:
                    verdict = "XPASS" if not args.strict_pending else "ok"
                if verdict == "FAIL":
                    failed.append(case.cid)
                print(f"[{verdict:5}] {case.cid:8} {case.what[:70]:70} status={row['status']} "
                      f"t={elapsed:.2f}s rss {before:.0f}->{peak:.0f} MiB healthz max "
                      f"{row['healthz_max_ms']} ms" + (f"  {'; '.join(ctx.notes)}" if ctx.notes else ""),
                      flush=True)
                for p in problems:
                    print(f"          - {p}", flush=True)
                if not server.alive():  # counted above; go on with a fresh server
                    if case.branch and not args.strict_pending:
                        print(f"          (troupe serve died in a pending input: {server.log_tail(3)})", flush=True)
                        server.stop()
                    else:
                        stopped(server, failed, args)
                    server = Server(args.binary, args.legacy, workdir, env)
        finally:
            stopped(server, failed, args)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    print(f"{len(results)} inputs in {time.monotonic() - start_all:.0f} s; "
          f"{len(failed)} failed{': ' + ', '.join(failed) if failed else ''}")
    return 0 if args.report_only or not failed else 1


if __name__ == "__main__":
    sys.exit(main())
