#!/usr/bin/env python3
"""Generate the Grafana dashboard: charts/troupe/dashboards/troupe.json and deploy/grafana-dashboard.json.

Edit the panels here, then run: python3 scripts/chart-dashboard.py
scripts/chart-check.sh fails when the JSON files differ from what this prints.
Use only metric names that src/adapters/metrics/ exports (metrics.cc, node_gpus_text.cc).
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DS = {"type": "prometheus", "uid": "${datasource}"}
R = "$__rate_interval"


def m(name, extra=""):
    """Metric selector restricted to the dashboard's job variable."""
    return name + '{job=~"$job"' + (", " + extra if extra else "") + "}"


panels = []


def panel(title, exprs, x, y, w=12, h=8, kind="timeseries", unit="short", desc="", stack=False):
    p = {"id": len(panels) + 1, "type": kind, "title": title, "description": desc, "datasource": DS,
         "gridPos": {"x": x, "y": y, "w": w, "h": h},
         "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
         "targets": [{"refId": chr(65 + i), "datasource": DS, "expr": e, "legendFormat": legend}
                     for i, (e, legend) in enumerate(exprs)]}
    if kind == "timeseries":
        p["fieldConfig"]["defaults"]["custom"] = {"stacking": {"mode": "normal" if stack else "none"}}
        p["options"] = {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull"]},
                        "tooltip": {"mode": "multi"}}
    else:
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area"}
    panels.append(p)


def row(title, y):
    panels.append({"id": len(panels) + 1, "type": "row", "title": title, "collapsed": False,
                   "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})


def quantile(q, metric, by=""):
    labels = f"{by}, le" if by else "le"
    return f"histogram_quantile({q}, sum by ({labels}) (rate({m(metric)}[{R}])))"


row("Health", 0)
panel("Troupe up", [(m("up"), "{{instance}}")], 0, 1, w=6, h=4, kind="stat",
      desc="1 when Prometheus scrapes Troupe's /metrics.")
panel("Troupe version", [(f"count by (version) ({m('troupe_build_info')})", "{{version}}")], 6, 1, w=6, h=4,
      kind="stat", desc="Running Troupe versions (troupe_build_info), instances of each.")
panel("GPU nodes by product", [(f"sum by (product) ({m('troupe_nodes')})", "{{product}}")], 12, 1, w=6, h=4,
      kind="stat", desc="GPU nodes in Troupe's model.")
panel("Pods", [(f"sum({m('troupe_pending_pods')})", "pending"), (f"sum({m('troupe_gpu_pods')})", "holding GPUs")],
      18, 1, w=6, h=4, kind="stat", desc="Pods filtered by Troupe and not yet bound; pods holding GPUs.")

row("Extender", 5)
panel("Scheduling latency by verb (p50, p99)",
      [(quantile(0.99, "troupe_extender_request_duration_seconds_bucket", "verb"), "p99 {{verb}}"),
       (quantile(0.5, "troupe_extender_request_duration_seconds_bucket", "verb"), "p50 {{verb}}")],
      0, 6, unit="s",
      desc="Time Troupe spent answering kube-scheduler's extender calls. bind includes the wait at a gang barrier.")
panel("Requests by verb and outcome",
      [(f"sum by (verb, outcome) (rate({m('troupe_extender_requests_total')}[{R}]))", "{{verb}} {{outcome}}")],
      12, 6, unit="reqps", desc="Extender calls per second; outcome is ok, error or bad_request.")
panel("Filter rejections by category",
      [(f"sum by (category) (rate({m('troupe_filter_rejections_total')}[{R}]))", "{{category}}")],
      0, 14, stack=True, desc="Nodes rejected by Troupe's filter per second, by reason category.")
panel("Placements by topology",
      [(f"sum by (topology) (rate({m('troupe_pods_placed_total')}[{R}]))", "{{topology}}")],
      12, 14, stack=True,
      desc="Pods placed per second. best: the best-connected GPU set the node allows; degraded: not.")

row("GPUs", 22)
GPUS_ALLOCATED = m("troupe_gpus", 'state="allocated"')
GPUS_TOTAL = m("troupe_gpus", 'state="total"')
GPUS_FREE = m("troupe_gpus", 'state="free"')
panel("GPUs by product and state", [(f"sum by (product, state) ({m('troupe_gpus')})", "{{product}} {{state}}")],
      0, 23, desc="total; allocated (whole GPUs held); shared (GPUs split by troupe.dev/gpu-milli); free (whole).")
panel("GPU allocation ratio",
      [(f"sum by (product) ({GPUS_ALLOCATED})"
        f" / sum by (product) ({GPUS_TOTAL})", "{{product}}")],
      12, 23, unit="percentunit", desc="Allocated GPUs / total GPUs, by product.")
panel("Fragmented GPUs",
      [(f"sum({m('troupe_fragmented_gpus')})", "fragmented"), (f"sum({GPUS_FREE})", "free")],
      0, 31, desc="Free GPUs stranded on nodes with fewer free GPUs than the node's largest power-of-two request size.")
panel("Topology quality of placements (p10, p50)",
      [(quantile(0.5, "troupe_placement_topology_quality_ratio_bucket"), "p50"),
       (quantile(0.1, "troupe_placement_topology_quality_ratio_bucket"), "p10")],
      12, 31, unit="percentunit",
      desc="Bottleneck bandwidth of the assigned GPU set relative to the best the node allows (1 = best).")

row("Gangs", 39)
panel("Gangs by state", [(f"sum by (state) ({m('troupe_gangs')})", "{{state}}")], 0, 40, w=8,
      desc="waiting: nothing held; planned: GPUs held, members binding; admitted.")
panel("GPUs reserved for gangs",
      [(f"sum({m('troupe_gang_reserved_gpus')})", "reserved GPUs"),
       (f"sum({m('troupe_gang_draining_nodes')})", "draining nodes")], 8, 40, w=8,
      desc="GPUs held for planned gangs whose members are not all bound; nodes drained for starving gangs.")
panel("Gang timeouts", [(f"sum(increase({m('troupe_gang_timeouts_total')}[{R}]))", "timeouts")], 16, 40, w=8,
      desc="Gang bind barriers that timed out before all members arrived (the gang is released and planned again).")
panel("Gang time to admit (p50, p99)",
      [(quantile(0.99, "troupe_gang_time_to_admit_seconds_bucket"), "p99"),
       (quantile(0.5, "troupe_gang_time_to_admit_seconds_bucket"), "p50")],
      0, 48, w=24, unit="s", desc="From a gang's first member reaching Troupe to all of its minimum members bound.")

row("Queues", 56)
panel("Allocated vs fair share by queue",
      [(f"max by (queue) ({m('troupe_queue_allocated_gpus')})", "{{queue}} allocated"),
       (f"max by (queue) ({m('troupe_queue_fair_share_gpus')})", "{{queue}} fair share")],
      0, 57,
      desc="GPUs each queue holds (its children included) and its fair share now (max over replicas: each "
           "keeps the same accounting): weighted dominant-resource "
           "share of the GPUs over the queues with demand, guarantees first (docs/queues.md). A queue above its "
           "share is held back while another below its share has pending pods that fit.")
panel("Pending by queue",
      [(f"max by (queue) ({m('troupe_queue_pending_gpus')})", "{{queue}} GPUs"),
       (f"max by (queue) ({m('troupe_queue_pending_pods')})", "{{queue}} pods")],
      12, 57,
      desc="What each queue's pending GPU pods ask for. Pending long below the fair share: the pods fit nowhere "
           "(see their FailedScheduling events), or the queue is at its limit.")
panel("Reclaim evictions by queue",
      [(f"max by (queue, reason) (increase({m('troupe_queue_evictions_total')}[{R}]))", "{{queue}} {{reason}}")],
      0, 65, stack=True,
      desc="Pods evicted (Eviction API) from queues above their fair share to give a queue below its guarantee "
           "its GPUs back; whole gangs only, after the minimum runtime.")
panel("Guarantee and limit by queue",
      [(f"max by (queue) ({m('troupe_queue_guaranteed_gpus')})", "{{queue}} guaranteed"),
       (f"max by (queue) ({m('troupe_queue_limit_gpus')})", "{{queue}} limit"),
       (f"max by (queue) ({m('troupe_queue_dominant_share')})", "{{queue}} dominant share")],
      12, 65,
      desc="Each queue's guaranteed GPUs and limit (only queues that set one), and its dominant share: the "
           "largest fraction of any GPU product it holds.")

QY = 17  # the rows below start this much lower, after the Queues row
row("GPU nodes", 56 + QY)
NODE_GPUS = "troupe_node_gpus"
node_table = {
    "id": len(panels) + 1, "type": "table", "title": "GPUs by node",
    "description": "Per GPU node: GPUs in total, allocated (GPU-equivalents held; shares count in "
                   "thousandths) and shared (split between pods by troupe.dev/gpu-milli). Sort by a column to "
                   "find full, empty or fragmented nodes. Reads troupe_node_gpus, the per-node series: with "
                   "troupe.metrics.perNodeSeries auto (the default) Troupe exports them only below "
                   "perNodeSeriesOffAt GPU nodes (1,000), so in larger clusters this table shows No data "
                   "(troupe_node_series_exported is 0); the per-product panels above still cover every node. "
                   "perNodeSeries: \"on\" keeps it at any size, at a larger scrape.",
    "datasource": DS, "gridPos": {"x": 0, "y": 57 + QY, "w": 24, "h": 10},
    "fieldConfig": {"defaults": {"unit": "short"}, "overrides": []},
    "options": {"showHeader": True, "sortBy": [{"displayName": "allocated", "desc": True}]},
    "targets": [{"refId": chr(65 + i), "datasource": DS, "format": "table", "instant": True,
                 "expr": "sum by (node, product) (" + m(NODE_GPUS, 'state="' + state + '"') + ")",
                 "legendFormat": state}
                for i, state in enumerate(("total", "allocated", "shared"))],
    # One row per node: the three queries joined on (node, product), their values renamed.
    "transformations": [
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True},
                                       "renameByName": {"Value #A": "total", "Value #B": "allocated",
                                                        "Value #C": "shared"}}}],
}
panels.append(node_table)

row("Troupe health: caches and the Kubernetes API", 67 + QY)
panel("Cache age by resource",
      [(f"time() - max by (resource) ({m('troupe_kube_last_sync_timestamp_seconds')})", "{{resource}}")],
      0, 68 + QY, w=8, unit="s",
      desc="Seconds since Troupe's cache of nodes / pods was last known current (list done, watch event or "
           "bookmark). Bookmarks arrive about once a minute; minutes more means the watch is stuck.")
panel("Cached objects", [(f"sum by (resource) ({m('troupe_kube_cached_objects')})", "{{resource}}")],
      8, 68 + QY, w=8, desc="Nodes and GPU-holding pods in Troupe's caches.")
panel("Relists and watch restarts",
      [(f"sum by (resource) (increase({m('troupe_kube_relists_total')}[{R}]))", "relist {{resource}}"),
       (f"sum by (resource, reason) (increase({m('troupe_kube_watch_restarts_total')}[{R}]))",
        "watch {{resource}} {{reason}}")],
      16, 68 + QY, w=8,
      desc="Full lists after the first (410 Gone) and reopened watches (closed: the server's timeout, normal; "
           "gone; error). Steady relists or errors mean the API server or the network is struggling.")
panel("API server calls by verb and code",
      [(f"sum by (verb, code) (rate({m('troupe_kube_api_requests_total')}[{R}]))", "{{verb}} {{code}}")],
      0, 76 + QY, w=12, unit="reqps",
      desc="Troupe's calls to the Kubernetes API server per second. Errors: code not 2xx (409 on a bind: "
           "someone else bound the pod; 403: RBAC; Unreachable / ConnectionLost: no response).")
panel("Filter narrowing: node scores",
      [(f"sum by (source) (rate({m('troupe_filter_node_scores_total')}[{R}]))", "{{source}}")],
      12, 76 + QY, w=12, stack=True,
      desc="With filter narrowTo: best, node values ranked per second: remembered from an earlier call for the "
           "same pod shape and node state, or computed. Mostly computed means many new pod shapes or a "
           "churning cluster, and slower filter calls.")
panel("Internal errors (caught exceptions)",
      [(f"sum by (where) (increase({m('troupe_internal_errors_total')}[{R}]))", "{{where}}")],
      0, 84 + QY, w=24, h=6,
      desc="Exceptions Troupe caught instead of ending the process, by where: watch (a Node or Pod it passed "
           "over), binder, events, housekeeping, ticker, http. Anything above 0 is a bug to report; the "
           "error log line (\"internal error\") says what failed.")

dashboard = {
    "title": "Troupe", "uid": "troupe", "tags": ["troupe", "scheduler", "gpu"],
    "description": "Troupe, the GPU scheduling extender: latency, decisions, GPU usage per product and node, "
                   "gangs, queues, Kubernetes API health.",
    "editable": True, "graphTooltip": 1, "schemaVersion": 39, "version": 1,
    "time": {"from": "now-1h", "to": "now"}, "refresh": "30s", "timezone": "",
    "templating": {"list": [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": ""},
        {"name": "job", "label": "Job", "type": "query", "datasource": DS,
         "query": {"query": "label_values(troupe_build_info, job)", "refId": "job"},
         "definition": "label_values(troupe_build_info, job)",
         "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "refresh": 2, "sort": 1, "hide": 0}]},
    "annotations": {"list": []}, "links": [], "panels": panels,
}

text = json.dumps(dashboard, indent=2) + "\n"
if __name__ == "__main__":
    if sys.argv[1:] == ["--print"]:
        sys.stdout.write(text)
    else:
        for out in ("charts/troupe/dashboards/troupe.json", "deploy/grafana-dashboard.json"):
            (ROOT / out).write_text(text)
            print(f"wrote {out}")
