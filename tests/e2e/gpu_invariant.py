"""The GPU index invariant, checked on what the API server says (reusable by any e2e test):

  for every node, over the bound pods that hold GPUs (phase not Succeeded/Failed):
    - a pod with troupe.dev/gpus lists exactly as many distinct indices as it holds GPUs
      (nvidia.com/gpu, or 1 for a troupe.dev/gpu-milli share), each below the node's
      allocatable nvidia.com/gpu;
    - no index is held by two whole-GPU pods, nor by a whole-GPU pod and a share;
      the shares on one index add up to at most 1000;
    - GPUs held in total (annotated or not) never exceed allocatable;
    - optionally, every pod bound through a given scheduler carries the annotation.

    from gpu_invariant import check_gpu_invariant
    check_gpu_invariant(pods, nodes, require_annotation_for="troupe-scheduler")

Raises AssertionError listing every violation; returns a summary otherwise.
"""
from kubehelpers import _qty_int as _qty, pod_gpu_request

GPU = "nvidia.com/gpu"
ASSIGNED = "troupe.dev/gpus"
MILLI = "troupe.dev/gpu-milli"


def share_milli(pod):
    """The pod's troupe.dev/gpu-milli: the resource (limits, else requests, of any container) or
    the annotation of the same name; 0 when it asks for no share."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        value = (res.get("limits") or {}).get(MILLI, (res.get("requests") or {}).get(MILLI))
        if value not in (None, ""):
            return _qty(value)
    return _qty(((pod.get("metadata") or {}).get("annotations") or {}).get(MILLI))


def gpus_held(pod):
    """GPUs a pod holds once bound: nvidia.com/gpu by Kubernetes' rule, or 1 for a share."""
    n = pod_gpu_request(pod)
    if n == 0 and share_milli(pod) > 0:
        return 1
    return n


def holds_gpus(pod):
    return bool(pod.get("spec", {}).get("nodeName")) and \
        pod.get("status", {}).get("phase") not in ("Succeeded", "Failed") and gpus_held(pod) > 0


def check_gpu_invariant(pods, nodes, require_annotation_for=None):
    """pods, nodes: v1 objects (lists). Returns {"pods": n, "annotated": n, "by_node": {...}}."""
    capacity = {n["metadata"]["name"]: _qty((n.get("status", {}).get("allocatable") or {}).get(GPU))
                for n in nodes}
    problems = []
    whole = {}   # (node, index) -> pod
    shares = {}  # (node, index) -> [(pod, milli)]
    held = {}    # node -> GPUs held
    annotated = 0
    counted = 0
    for p in pods:
        if not holds_gpus(p):
            continue
        counted += 1
        meta = p["metadata"]
        key = f'{meta["namespace"]}/{meta["name"]}'
        node = p["spec"]["nodeName"]
        n = gpus_held(p)
        ann = (meta.get("annotations") or {})
        text = ann.get(ASSIGNED)
        milli = share_milli(p)
        share = n == 1 and 0 < milli < 1000
        if not (share and text is not None):
            held[node] = held.get(node, 0) + n  # annotated shares count once per GPU, below
        if text is None:
            if require_annotation_for and p["spec"].get("schedulerName") == require_annotation_for:
                problems.append(f"{key} on {node}: bound through {require_annotation_for} but has no {ASSIGNED}")
            continue
        annotated += 1
        try:
            idx = [int(x) for x in text.split(",")]
        except ValueError:
            problems.append(f"{key} on {node}: {ASSIGNED}={text!r} is not a list of indices")
            continue
        if len(set(idx)) != len(idx) or len(idx) != n:
            problems.append(f"{key} on {node}: {ASSIGNED}={text!r} must list {n} distinct indices")
        for g in idx:
            if not 0 <= g < capacity.get(node, 0):
                problems.append(f"{key} on {node}: GPU {g} out of range (node has {capacity.get(node, 0)})")
        milli = milli if share else 1000
        for g in set(idx):
            if milli >= 1000:
                if (node, g) in whole:
                    problems.append(f"GPU {g} of {node} held by both {whole[(node, g)]} and {key}")
                whole[(node, g)] = key
            else:
                shares.setdefault((node, g), []).append((key, milli))
    for (node, g), lst in shares.items():
        if (node, g) not in whole:
            held[node] = held.get(node, 0) + 1
        if (node, g) in whole:
            problems.append(f"GPU {g} of {node} held whole by {whole[(node, g)]} and shared by {[k for k, _ in lst]}")
        if sum(m for _, m in lst) > 1000:
            problems.append(f"GPU {g} of {node} shared beyond 1000 milli: {lst}")
    for node, n in held.items():
        if n > capacity.get(node, 0):
            problems.append(f"{node}: {n} GPUs held by bound pods, allocatable {capacity.get(node, 0)}")
    if problems:
        raise AssertionError("GPU invariant violated:\n  " + "\n  ".join(problems))
    return {"pods": counted, "annotated": annotated, "by_node": held}
