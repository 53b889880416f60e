"""The live path keeps the simulator's quality: a slice of the FGD trace (60 nodes, the pods
of seed 42's order until they ask 105% of the GPUs) replayed through a real kube-scheduler +
Troupe (--narrow-to best) on its own cluster, against `troupe simulate --in-order` on the same
slice. Kubernetes mode only: standalone Troupe never learns about pods kube-scheduler binds
itself, so its GPU and CPU accounting would not follow the replay.

The bigger run (300 nodes, ~2,000 pods) is the same tool by hand:
    python3 tests/e2e/trace_replay.py --nodes 300
"""
import argparse
import os

import pytest

import trace_replay
from kubehelpers import read_state, STATE_FILE


def test_live_replay_matches_the_simulator():
    if not os.path.exists(os.path.join(trace_replay.TRACE_DIR, "openb_pod_list_default.csv")):
        pytest.skip(f"the FGD trace is not at {trace_replay.TRACE_DIR} (../shared/data); nothing to replay")
    if os.path.exists(STATE_FILE) and read_state().get("TROUPE_MODE", "standalone") != "kube":
        pytest.skip("runs once, in the Kubernetes-mode pass of the suite (it starts its own cluster)")
    args = argparse.Namespace(nodes=60, fill=105, seed=42, arrive=100, policy="troupe", narrow_to="best", tolerance=0.5,
                              trace_dir=trace_replay.TRACE_DIR,
                              troupe=os.environ.get("TROUPE_BIN") or os.path.join(trace_replay.ROOT, "build", "troupe"),
                              work_dir=os.path.join(trace_replay.ROOT, "build", "e2e-replay-slice"), keep=False)
    r = trace_replay.run(args)
    print(r)
    assert r["pods"] >= 300
    assert r["sim_unallocated_at"] is not None, "the slice never reached 100% arrived"
    # The window reading agrees with the simulator's own report of it.
    assert abs(r["sim_unallocated_at"] - r["sim_unallocated_reported"]) < 1e-3
    assert r["live_placed"] > 0 and r["live_placed"] < r["pods"], "the slice should overfill the fleet"
    assert abs(r["live_unallocated_at"] - r["sim_unallocated_at"]) <= 0.5, r
    # In fact every pod lands on the node the simulator chose.
    assert r["pods_on_other_nodes"] == 0, r["first_differences"]
