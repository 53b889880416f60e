"""A small REST client for the e2e API server (stdlib only): much faster than a kubectl
process per call, and explicit about failures, which the tests need while the API server
restarts.

    api = KubeAPI.from_kubeconfig(KUBECONFIG)
    api.create_pod("ns", manifest)          # retries while the API server is down
    api.list_pods()                          # every pod, all namespaces
"""
import base64
import json
import os
import ssl
import tempfile
import time
import urllib.error
import urllib.request

import yaml


class APIError(RuntimeError):
    def __init__(self, status, message):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class KubeAPI:
    def __init__(self, server, token, ca_pem=None, timeout=10.0):
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout
        if ca_pem:
            self.ctx = ssl.create_default_context(cadata=ca_pem)
        else:
            self.ctx = ssl.create_default_context()

    @classmethod
    def from_kubeconfig(cls, path):
        with open(path, encoding="utf-8") as f:
            kc = yaml.safe_load(f)
        ctx_name = kc["current-context"]
        ctx = next(c["context"] for c in kc["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in kc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in kc["users"] if u["name"] == ctx["user"])
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode() \
            if "certificate-authority-data" in cluster else None
        return cls(cluster["server"], user.get("token"), ca)

    def request(self, method, path, body=None, content_type="application/json"):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=self.timeout) as resp:
                text = resp.read()
                return json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                message = json.loads(text).get("message", text)
            except ValueError:
                message = text
            raise APIError(e.code, message) from None

    def retrying(self, fn, deadline_s=120.0, what="request"):
        """fn() until it does not fail for connection reasons or 5xx/429 (the API server
        restarting); other HTTP errors are raised at once."""
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                return fn()
            except APIError as e:
                if e.status not in (429, 500, 502, 503, 504) or time.monotonic() > deadline:
                    raise
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what}: API server unreachable for {deadline_s}s: {e}") from None
            time.sleep(0.2)

    # -- pods -------------------------------------------------------------------------
    def create_pod(self, namespace, manifest, retry=True):
        def create():
            try:
                return self.request("POST", f"/api/v1/namespaces/{namespace}/pods", manifest)
            except APIError as e:
                if e.status == 409:  # created by an attempt whose answer was lost
                    return self.get_pod(namespace, manifest["metadata"]["name"])
                raise
        return self.retrying(create, what="create pod") if retry else create()

    def get_pod(self, namespace, name):
        try:
            return self.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
        except APIError as e:
            if e.status == 404:
                return None
            raise

    def list_pods(self, namespace=None):
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        return self.retrying(lambda: self.request("GET", path), what="list pods")["items"]

    def list_nodes(self):
        return self.retrying(lambda: self.request("GET", "/api/v1/nodes"), what="list nodes")["items"]

    def delete_pod(self, namespace, name):
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
        try:
            self.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body)
        except APIError as e:
            if e.status != 404:
                raise

    def events(self, namespace):
        return self.request("GET", f"/api/v1/namespaces/{namespace}/events")["items"]

    # -- service accounts ---------------------------------------------------------------
    def create_token(self, namespace, sa, seconds=3600):
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds}}
        r = self.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token", body)
        return r["status"]["token"]


def kubeconfig_ca_pem(path):
    with open(path, encoding="utf-8") as f:
        kc = yaml.safe_load(f)
    cluster = kc["clusters"][0]["cluster"]
    return base64.b64decode(cluster["certificate-authority-data"]).decode()


def temp_dir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TMPDIR"))
