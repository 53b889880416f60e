"""Queue helpers shared by tests/e2e/test_queues.py and test_examples.py: the CRD, Queue objects,
and GPU amounts as Queue status states them (an integer, or a quantity string "2.5" / "500m")."""
import os

from kubehelpers import ROOT

QUEUE_CRD = os.path.join(ROOT, "deploy", "crds", "queues.troupe.dev.yaml")
QUEUE_LABEL = "troupe.dev/queue"


def install_crd(kube):
    """Apply deploy/crds/queues.troupe.dev.yaml and wait until the API serves it."""
    kube.kubectl("apply", "-f", QUEUE_CRD)
    kube.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd/queues.troupe.dev")


def gpus(value):
    """A GPU amount (int, float or quantity string; None = 0) in GPUs."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if text.endswith("m"):
        return float(text[:-1]) / 1000.0
    return float(text)


def queue(name, weight=None, parent=None, guaranteed=None, limit=None, preemptible=None):
    spec = {}
    if weight is not None:
        spec["weight"] = weight
    if parent:
        spec["parent"] = parent
    if guaranteed is not None:
        spec["guaranteed"] = {"gpus": guaranteed}
    if limit is not None:
        spec["limit"] = {"gpus": limit}
    if preemptible is not None:
        spec["preemptible"] = preemptible
    return {"apiVersion": "troupe.dev/v1alpha1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def queue_status(kube):
    """name -> the Queue's status ({} until Troupe writes one)."""
    return {q["metadata"]["name"]: q.get("status") or {} for q in kube.get("queues")["items"]}


def delete_queues(kube, names):
    if names:
        kube.kubectl("delete", "queues", *names, "--ignore-not-found", "--wait=false", check=False)
