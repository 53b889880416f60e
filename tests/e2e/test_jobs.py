"""Jobs as users submit them, through the local control plane's kube-controller-manager
(scripts/cluster-up.sh starts it; docs/e2e-tests.md): the Job controller makes the pods, the
ServiceAccount controllers make accounts and tokens.

- An Indexed `batch/v1` Job whose pod template carries Troupe's gang annotations: its 4 pods
  bind as one gang (Troupe admits one gang), each with `troupe.dev/gpus`; also with
  WorkloadWithJob on, where the Job controller names a basic PodGroup in each pod.
- On 1.37+ with K8S_FEATURES=workload-jobs (gate WorkloadWithJob): a Job with
  `spec.scheduling.schedulingPolicy.gang` and no Troupe annotation; the Job controller makes the
  Workload and the PodGroup, and that PodGroup is the gang.
- A new namespace gets its `default` ServiceAccount and `kube-root-ca.crt`, and a
  ServiceAccount-token Secret is filled with a token that kube-apiserver accepts (signed with
  the key pair the two share).

The gang tests need TROUPE_MODE=kube (Troupe's bind barrier) and bring their own fake nodes
(tests/e2e/gang_fleet.py): part "a" (2 x 8 GPUs) for the annotated Job, "b" (2 x 8) for the
Job controller's PodGroup.
"""
import base64
import time

import pytest

from gang_fleet import module_fleet, pod, series_value, troupe_series, wait_no_gang_holds
from gpu_invariant import check_gpu_invariant
from kubeapi import APIError, KubeAPI
from kubehelpers import KUBECONFIG
from test_gangs import assert_all_or_nothing, watch

PARTS = {"a": 2, "b": 2}
JOB_LABEL = "batch.kubernetes.io/job-name"


@pytest.fixture(scope="module")
def kube_mode(e2e_state):
    if e2e_state.get("TROUPE_MODE") != "kube":
        pytest.skip("gangs need Troupe's bind barrier, which needs TROUPE_MODE=kube")
    if not e2e_state.get("KCM_PORT"):
        pytest.skip("this control plane runs no kube-controller-manager (started before it was added)")
    return e2e_state


@pytest.fixture(scope="module")
def fleet(kube_mode, troupe_url):
    yield from module_fleet(kube_mode, KUBECONFIG, troupe_url, PARTS)


def workload_with_job(state):
    """The control plane runs the WorkloadWithJob gate (scripts/lib-e2e.sh, e2e_feature_gates)."""
    return state.get("K8S_FEATURES") == "workload-jobs"


def indexed_job(name, count, gpus, fleet, part, scheduler, annotations=None, scheduling=None):
    template = pod("member", gpus, fleet, part, scheduler, annotations=annotations)
    template["metadata"].pop("name")
    template["spec"]["restartPolicy"] = "Never"
    spec = {"completionMode": "Indexed", "completions": count, "parallelism": count, "backoffLimit": 0,
            "template": {"metadata": template["metadata"], "spec": template["spec"]}}
    if scheduling:
        spec["scheduling"] = scheduling
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def job_pods(api, namespace, job, count, timeout=30):
    """The names of the Job's pods, once the Job controller has made `count` of them."""
    deadline = time.monotonic() + timeout
    while True:
        names = [p["metadata"]["name"] for p in api.list_pods(namespace)
                 if (p["metadata"].get("labels") or {}).get(JOB_LABEL) == job]
        if len(names) >= count:
            return names
        assert time.monotonic() < deadline, f"the Job controller made {len(names)} of {count} pods of {job}"
        time.sleep(0.2)


def admitted_gangs(url):
    return series_value(troupe_series(url), "troupe_gang_time_to_admit_seconds_count")


def assert_bound_whole_with_gpus(api, namespace, names, gpus):
    history = watch(api, namespace, {"job": names}, lambda c: c["job"] == len(names), timeout=90)
    assert_all_or_nothing(history, "job", len(names))
    pods = {p["metadata"]["name"]: p for p in api.list_pods(namespace)}
    for n in names:
        got = (pods[n]["metadata"].get("annotations") or {}).get("troupe.dev/gpus", "")
        assert len(got.split(",")) == gpus, f"{n}: troupe.dev/gpus={got!r}"
    check_gpu_invariant(api.list_pods(), api.list_nodes(), require_annotation_for="troupe-scheduler")
    return pods


def clean_jobs(api, namespace):
    """Deletes the namespace's Jobs and pods now (the namespace fixture does it too, at the end):
    the pods are force-deleted (no kubelet confirms them), and the Job controller's tracking
    finalizer is taken off."""
    for job in api.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]:
        api.request("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/{job['metadata']['name']}",
                    {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"})
    for p in api.list_pods(namespace):
        name = p["metadata"]["name"]
        api.delete_pod(namespace, name)
        try:
            api.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}", {"metadata": {"finalizers": None}},
                        content_type="application/merge-patch+json")
        except APIError as e:
            if e.status != 404:
                raise
    deadline = time.monotonic() + 30
    while api.list_pods(namespace):
        assert time.monotonic() < deadline, f"pods of {namespace} not gone 30s after deletion"
        time.sleep(0.2)


def test_indexed_job_with_troupe_gang_annotations_binds_as_one_gang(api, namespace, scheduler_name, fleet,
                                                                     troupe_url, gpu_invariant):
    # With WorkloadWithJob the Job controller also names a (basic) PodGroup in each pod: Troupe's
    # troupe.dev/gang still wins (include/troupe/sched/gang/gang.h).
    # 4 members of 4 GPUs on 2 x 8: the whole part, two per node.
    before = admitted_gangs(troupe_url)
    job = indexed_job("train", 4, 4, fleet, "a", scheduler_name,
                      annotations={"troupe.dev/gang": "train", "troupe.dev/gang-size": "4"})
    api.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
    names = job_pods(api, namespace, "train", 4)
    pods = assert_bound_whole_with_gpus(api, namespace, names, 4)
    indexes = sorted(p["metadata"]["annotations"].get("batch.kubernetes.io/job-completion-index") for p in pods.values()
                     if p["metadata"]["name"] in names)
    assert indexes == ["0", "1", "2", "3"], indexes
    assert admitted_gangs(troupe_url) - before == 1, "Troupe admitted the 4 pods as other than one gang"
    clean_jobs(api, namespace)
    wait_no_gang_holds(troupe_url, api)


def test_job_controllers_own_podgroup_is_the_gang(api, namespace, scheduler_name, fleet, troupe_url, gpu_invariant,
                                                 e2e_state):
    if not workload_with_job(e2e_state):
        pytest.skip("the Job controller makes PodGroups only with the WorkloadWithJob gate (Kubernetes 1.37+ "
                    "with K8S_FEATURES=workload-jobs)")
    before = admitted_gangs(troupe_url)
    job = indexed_job("native", 4, 4, fleet, "b", scheduler_name, scheduling={"schedulingPolicy": {"gang": {}}})
    api.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
    names = job_pods(api, namespace, "native", 4)
    pods = assert_bound_whole_with_gpus(api, namespace, names, 4)
    groups = {pods[n]["spec"].get("schedulingGroup", {}).get("podGroupName") for n in names}
    assert len(groups) == 1 and None not in groups, f"the pods name no single PodGroup: {groups}"
    group = api.request("GET", f"/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups/{groups.pop()}")
    owners = [o["kind"] for o in group["metadata"].get("ownerReferences") or [] if o.get("controller")]
    assert owners == ["Job"], f"PodGroup {group['metadata']['name']} is not the Job controller's: {owners}"
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4, group["spec"]
    assert admitted_gangs(troupe_url) - before == 1, "Troupe admitted the 4 pods as other than one gang"
    print(f"\n[measure] Job controller's PodGroup {group['metadata']['name']}: {group['spec']}")
    clean_jobs(api, namespace)
    wait_no_gang_holds(troupe_url, api)


def test_namespace_gets_service_account_and_a_token_the_apiserver_accepts(api, namespace, kube_mode):
    deadline = time.monotonic() + 30
    while True:
        try:
            api.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
            ca = api.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/kube-root-ca.crt")
            break
        except APIError as e:
            assert e.status == 404 and time.monotonic() < deadline, \
                f"no default ServiceAccount or kube-root-ca.crt in {namespace} after 30s: {e}"
            time.sleep(0.2)
    assert "BEGIN CERTIFICATE" in ca["data"]["ca.crt"]
    api.request("POST", f"/api/v1/namespaces/{namespace}/secrets", {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "default-token", "annotations": {"kubernetes.io/service-account.name": "default"}}})
    while True:
        data = api.request("GET", f"/api/v1/namespaces/{namespace}/secrets/default-token").get("data") or {}
        if data.get("token"):
            break
        assert time.monotonic() < deadline, "the ServiceAccount-token controller did not fill the Secret in 30s"
        time.sleep(0.2)
    token = base64.b64decode(data["token"]).decode()
    as_sa = KubeAPI.from_kubeconfig(KUBECONFIG)
    as_sa.token = token
    review = as_sa.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:default", review
