#!/usr/bin/env python3
"""scripts/demo.py, the README's demo, against the real `troupe serve` on examples/cluster.yaml:
every step answers as the demo describes it (no refused bind, the right nodes in each column),
and the bind shows the concrete GPUs Troupe chose. The demo's own checks must be able to fail:
against a server that refuses every bind, it prints UNEXPECTED and exits 1.

Run: python3 tests/tools/demo_test.py (scripts/test.sh does; needs build/troupe)."""

import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "scripts", "demo.py")
TROUPE = os.environ.get("TROUPE_BIN", os.path.join(ROOT, "build", "troupe"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DemoAgainstTroupe(unittest.TestCase):
    def setUp(self):
        if not os.access(TROUPE, os.X_OK):
            self.skipTest(f"{TROUPE} is not built")
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(suffix=".log", delete=False)
        self.server = subprocess.Popen(
            [TROUPE, "serve", "--listen", f"127.0.0.1:{self.port}", "--cluster",
             os.path.join(ROOT, "examples", "cluster.yaml")], stderr=self.log, stdout=subprocess.DEVNULL)
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1)
                return
            except OSError:
                time.sleep(0.05)
        self.fail("troupe serve did not answer /healthz")

    def tearDown(self):
        self.server.terminate()
        self.server.wait()
        os.unlink(self.log.name)

    def test_every_step_answers_as_described(self):
        run = subprocess.run([sys.executable, DEMO, f"http://127.0.0.1:{self.port}", "--log", self.log.name],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertNotIn("UNEXPECTED", run.stdout)
        self.assertNotIn("refused", run.stdout)
        # The seed pod took GPUs 0-3 of h100-0; the demo's 4-GPU pod gets the other four.
        self.assertIn("bound to h100-0, GPUs 4, 5, 6, 7", run.stdout)
        self.assertIn('troupe_gpus{product="NVIDIA-H100-80GB-HBM3",state="allocated"} 8', run.stdout)


class RefusingExtender(http.server.BaseHTTPRequestHandler):
    """Answers filter with every candidate passing and refuses every bind."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.endswith("/bind"):
            answer = {"Error": "no record of this pod"}
        elif self.path.endswith("/prioritize"):
            answer = [{"Host": n, "Score": 0} for n in body.get("NodeNames") or []]
        else:
            answer = {"NodeNames": body.get("NodeNames") or [], "FailedNodes": {}}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class DemoCatchesWrongAnswers(unittest.TestCase):
    def test_refused_bind_fails_the_demo(self):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RefusingExtender)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            run = subprocess.run([sys.executable, DEMO, f"http://127.0.0.1:{server.server_port}"],
                                 capture_output=True, text=True, timeout=60)
        finally:
            server.shutdown()
        self.assertEqual(run.returncode, 1, run.stdout)
        self.assertIn("refused: no record of this pod", run.stdout)
        self.assertIn("UNEXPECTED", run.stdout)
        self.assertIn("07-bind-4gpu.json", run.stderr)


if __name__ == "__main__":
    unittest.main()
