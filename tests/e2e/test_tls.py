"""HTTPS with client certificates between the real kube-scheduler and Troupe.

Runs when the cluster was started with TROUPE_TLS=1 (scripts/test.sh does so for its
Kubernetes-mode pass): kube-scheduler's extender has enableHTTPS: true and a tlsConfig with a
client certificate, Troupe runs with --tls-cert/--tls-key/--client-ca (scripts/lib-e2e.sh).
Every other test of that pass schedules through this connection; these check it directly:
the scheduler's calls arrive over HTTPS, and a client without a certificate (or with one
another CA signed, or speaking plain HTTP) gets no answer.
"""
import os
import socket
import ssl

import pytest

from kubehelpers import E2E_DIR, gpu_pod

TLS_DIR = os.path.join(E2E_DIR, "troupe-tls")


@pytest.fixture(scope="module")
def tls_port(e2e_state):
    if e2e_state.get("TROUPE_TLS") != "1":
        pytest.skip("cluster started without TROUPE_TLS=1 (scripts/test.sh's Kubernetes-mode pass sets it)")
    return int(e2e_state["TROUPE_PORT"])


def https_get(port, path, cert=None):
    """(status line or None, error): GET over TLS, trusting the e2e CA, with client `cert` or none."""
    ctx = ssl.create_default_context(cafile=os.path.join(TLS_DIR, "ca.crt"))
    if cert:
        ctx.load_cert_chain(os.path.join(TLS_DIR, cert + ".crt"), os.path.join(TLS_DIR, cert + ".key"))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
                data = b""
                while b"\r\n" not in data:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        return (line or None), None
    except (ssl.SSLError, OSError) as e:  # TLS 1.3 reports a refused certificate on the first read
        return None, f"{type(e).__name__}: {e}"


def metric(troupe_url, name):
    import urllib.request
    with urllib.request.urlopen(troupe_url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def test_scheduler_config_uses_https_with_a_client_certificate(tls_port, scheduler_config):
    ext = scheduler_config["extenders"][0]
    assert ext["urlPrefix"] == f"https://127.0.0.1:{tls_port}"
    assert ext["enableHTTPS"] is True
    assert {"certFile", "keyFile", "caFile"} <= set(ext["tlsConfig"])


def test_kube_scheduler_schedules_through_https(tls_port, kube, namespace, scheduler_name, troupe_url):
    before = metric(troupe_url, 'troupe_extender_requests_total{outcome="ok",verb="filter"}')
    kube.create([gpu_pod("over-tls", gpus=1, scheduler=scheduler_name)], namespace)
    assert kube.wait_pod_bound("over-tls", namespace, timeout=60), "the pod was not bound through Troupe"
    after = metric(troupe_url, 'troupe_extender_requests_total{outcome="ok",verb="filter"}')
    assert after > before, "kube-scheduler's filter calls did not reach Troupe over HTTPS"


def test_a_client_with_the_scheduler_certificate_is_served(tls_port):
    line, err = https_get(tls_port, "/healthz", cert="client")
    assert line == "HTTP/1.1 200 OK", err


@pytest.mark.parametrize("cert", [None, "stranger"], ids=["no-certificate", "other-ca"])
def test_a_client_without_an_accepted_certificate_is_refused(tls_port, cert):
    line, err = https_get(tls_port, "/healthz", cert=cert)
    assert line is None, f"answered {line!r} without an accepted client certificate"
    assert err, "the connection neither failed nor answered"


def test_plain_http_on_the_https_port_gets_no_answer(tls_port):
    with socket.create_connection(("127.0.0.1", tls_port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        s.settimeout(10)
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
    assert not data.startswith(b"HTTP/"), data[:80]
