#!/usr/bin/env python3
"""Checks monitoring/dashboards/*.json: the structure Grafana needs, and that every query of
every panel parses and answers with series against a real Prometheus over real agents.

The structure (--structure-only, no processes): both files are JSON; uid and title set;
schemaVersion 38 or later; a `datasource` variable of type datasource (prometheus) and `job`,
`instance` (and, in the node view, `agent`) variables whose queries are label_values(); panel
ids unique in a dashboard, rows' nested panels included; every gridPos whole and within 24
columns, and no two panels overlap; every panel and target names the data source
`${datasource}` and no dashboard names a data source uid of its own; every target has an expr
and a refId unique in its panel; every target over xtel_transfer_duration_seconds_bucket asks
for exemplars; heatmaps ask for the heatmap format; the views query the families and rules the
brief asks them to show (MUST_QUERY).

The queries (with --xfer-demo, --exporter, --prometheus): four xfer_demo pairs writing for the
whole test (every transfer timed), one of them over TCP (UCX_TLS=tcp), whose transfers take
far longer than the others' through shared memory: it is the node's straggler. xtel-exporter
serves their directory (with --remote-write to a port no one listens on, so that its
remote-write counters exist), and Prometheus 2.42 (--enable-feature=exemplar-storage) scrapes
it every second as job "xtel-exporter" and evaluates monitoring/rules/*.rules.yaml every second,
with every range in the rules' expressions shortened to RULE_RANGE ([5m] -> [20s], [1h] ->
[20s]; a subquery's [5m:1m] -> [20s:1s]) so that they have data within the test; `for:` and the
rule names stay as they are.

Each target's expr is run as an instant query (/api/v1/query) twice: once with every dashboard
variable at its "All" value (`.*`; the dashboards match variables with =~), once with the values
the variables' own label_values() queries find, in the order the dashboard lists them (job
`xtel-exporter`, the first instance, and for `agent` the first agent whose name ends in
`-initiator`: a target agent moves nothing itself), regex-escaped as Grafana escapes the value
of a multi-value variable. Grafana's own variables are replaced by fixed values:
$__rate_interval and $__interval by RATE_INTERVAL and INTERVAL, $__range by RANGE ($__range_s,
$__range_ms in seconds and milliseconds), $__interval_ms in milliseconds. `$var`, `${var}`,
`${var:format}` and `[[var]]` are all replaced. A query must parse and answer with at least one
series, except those MAY_BE_EMPTY lists with the reason: they must still parse, and those
WIDENED lists must answer once widened (the dead agents' count asked for live ones, the alerts
firing asked for pending ones too). Latency targets (exemplar: true) must also return exemplars
that carry request_id. Finally the check is run on a copy of a query with a misspelled metric
name, which it must report as empty: the check can fail.

usage: dashboards_test.py --source-dir DIR [--structure-only]
                          [--xfer-demo PATH --exporter PATH --prometheus PATH]
                          [--dashboard FILE]...   (default: both files under monitoring/)
"""

import argparse
import ctypes
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from ports import free_port  # tests/: one choice of port for every test

RULE_RANGE = "20s"
RATE_INTERVAL = "20s"
INTERVAL = "5s"
RANGE = "60s"
SETTLE_S = 60  # the longest the rules may take to have data after the first scrape

# (dashboard uid, panel title) -> why a healthy demo may leave it without series. Each still
# has to parse. A panel whose family this build does not serve yet is listed in NEEDS_FAMILY.
MAY_BE_EMPTY = {
    ("xtel-node", "Dead agents"): "no agent dies in the demo",
    ("xtel-fleet", "Alerts firing"): "an alert fires only after its `for:`, longer than the test",
}

# (dashboard uid, panel title) of a MAY_BE_EMPTY panel -> the same query widened, which the demo
# does give series: so that its names (the family, the alerts' names) are still checked. The
# demo's straggler keeps XtelStragglerPeer pending; the live agents have a state.
WIDENED = {
    ("xtel-node", "Dead agents"): ('state="dead"', 'state="live"'),
    # Over the last 5 minutes: the straggler's alert can leave pending for an evaluation when
    # its flag does (a CI run under ASan caught it between two).
    ("xtel-fleet", "Alerts firing"): ('ALERTS{alertname=~"Xtel.*", alertstate="firing"}',
                                      'max_over_time(ALERTS{alertname=~"Xtel.*", '
                                      'alertstate=~"firing|pending"}[5m])'),
}

# (dashboard uid, panel title) -> the family it shows: may be empty while Prometheus has no
# series of that family at all (an xtel-exporter that does not serve it yet), never once it has.
NEEDS_FAMILY = {
    ("xtel-node", "Agents and their state"): "xtel_exporter_agent_state",
}

# What each view must show (the brief's list): a name each view's queries must mention.
MUST_QUERY = {
    "xtel-node": [
        "xtel_exporter_agents", "xtel_exporter_agent_state",
        "agent_operation:xtel_transfer_bytes:rate1m",
        "agent_peer_operation:xtel_transfer_bytes:rate1m", "xtel_transfer_duration_seconds_bucket",
        "agent_kind:xtel_errors:rate5m", "agent:xtel_transfer_errors:ratio_rate5m",
        "xtel_telemetry_events_dropped_total", "agent:xtel_telemetry_loss:ratio_rate5m",
        "xtel_telemetry_exporter_up", "xtel_telemetry_exporter_events_lost_total", "up{",
        "xtel_exporter_scrape_duration_seconds", "xtel_exporter_files_refused_total",
        "xtel_exporter_families_left_out_total", "xtel_exporter_remote_write_requests_sent_total",
        "xtel_exporter_http_connections_closed_total", "process_cpu_seconds_total",
        "process_resident_memory_bytes", "peer_operation:xtel_transfer:straggler"],
    "xtel-fleet": [
        "agent_operation:xtel_transfer_bytes:rate1m", "xtel_transfer_duration_seconds_bucket",
        "agent_kind:xtel_errors:rate5m", "xtel_exporter_agents",
        "agent:xtel_telemetry_loss:ratio_rate5m",
        "agent_peer_operation:xtel_transfer_duration_seconds:p99_5m",
        "peer_operation:xtel_transfer:straggler", 'ALERTS{alertname=~"Xtel.*"'],
}

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


class Failures:
    def __init__(self, word="FAIL"):
        self.items = []
        self.word = word

    def add(self, where, what):
        self.items.append(f"{where}: {what}")
        print(f"{self.word} {where}: {what}", flush=True)


# --------------------------------------------------------------------------- structure

def all_panels(panels):
    """Every panel, the panels of rows (collapsed rows keep theirs in `panels`) included."""
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


def variable_query(v):
    q = v.get("query")
    return q.get("query", "") if isinstance(q, dict) else (q or "")


def check_structure(d, name, fail):
    uid = d.get("uid")
    if not isinstance(uid, str) or not uid:
        fail.add(name, "no uid")
    if not d.get("title"):
        fail.add(name, "no title")
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 38:
        fail.add(name, f"schemaVersion {d.get('schemaVersion')!r}: Grafana 10 needs 38 or later")
    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        fail.add(name, "no `datasource` variable of type datasource with query prometheus")
    wanted = ["job", "instance"] + (["agent"] if uid == "xtel-node" else [])
    for v in wanted:
        var = variables.get(v)
        if not var or var.get("type") != "query":
            fail.add(name, f"no query variable `{v}`")
        elif not variable_query(var).startswith("label_values("):
            fail.add(name, f"variable `{v}` is not a label_values() query")
        elif var.get("datasource") != DATASOURCE:
            fail.add(name, f"variable `{v}` does not use ${{datasource}}")

    # No data source uid but the variable, anywhere (Grafana's own annotation source aside).
    def walk(x, path):
        if isinstance(x, dict):
            src = x.get("datasource")
            if isinstance(src, dict) and src.get("type") != "grafana" and src != DATASOURCE:
                fail.add(name, f"{path} names data source {src}: expected {DATASOURCE}")
            if isinstance(src, str) and src not in ("${datasource}", "$datasource"):
                fail.add(name, f"{path} names data source {src!r}")
            for k, v in x.items():
                walk(v, f"{path}.{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")
    walk(d, name)

    ids = {}
    text = "\n".join(t.get("expr", "") for p in all_panels(d.get("panels", []))
                     for t in p.get("targets") or [])
    for p in all_panels(d.get("panels", [])):
        where = f"{name} panel {p.get('id')} {p.get('title')!r}"
        if not isinstance(p.get("id"), int):
            fail.add(where, "no integer id")
        elif p["id"] in ids:
            fail.add(where, f"id {p['id']} also used by {ids[p['id']]!r}")
        else:
            ids[p["id"]] = p.get("title")
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in ("h", "w", "x", "y")):
            fail.add(where, f"gridPos {g} lacks an integer h, w, x or y")
        elif g["w"] < 1 or g["h"] < 1 or g["x"] < 0 or g["y"] < 0 or g["x"] + g["w"] > 24:
            fail.add(where, f"gridPos {g} is outside the 24 columns")
        if not p.get("title"):
            fail.add(where, "no title")
        if p.get("type") == "row":
            if p.get("targets"):
                fail.add(where, "a row with targets")
            continue
        if p.get("datasource") != DATASOURCE:
            fail.add(where, f"datasource {p.get('datasource')}: expected {DATASOURCE}")
        targets = p.get("targets") or []
        if not targets:
            fail.add(where, "no targets")
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs) or not all(refs):
            fail.add(where, f"refIds {refs} are not set and unique")
        for t in targets:
            expr = t.get("expr", "")
            if not expr.strip():
                fail.add(where, f"target {t.get('refId')} has no expr")
            if "xtel_transfer_duration_seconds_bucket" in expr and t.get("exemplar") is not True:
                fail.add(where, f"target {t.get('refId')} is a latency query without exemplars")
            if p.get("type") == "heatmap" and t.get("format") != "heatmap":
                fail.add(where, f"heatmap target {t.get('refId')} is not in heatmap format")
            # Dashboard variables are matched with =~ so that "All" (.*) and several values
            # work; an exact match would select nothing for them.
            for m in re.finditer(r'(!?=)"\$\{?(job|instance|agent)\b', expr):
                fail.add(where, f"`{m.group(0)}`: match dashboard variables with =~")
    # Panels side by side do not overlap: among the top-level ones (rows are one unit high) and
    # among a collapsed row's own, which Grafana lays out below the row when it is opened.
    def overlaps(level, where):
        boxes = [(p.get("title"), p["gridPos"]) for p in level
                 if all(isinstance(p.get("gridPos", {}).get(k), int) for k in ("h", "w", "x", "y"))]
        for i, (ta, a) in enumerate(boxes):
            for tb, b in boxes[i + 1:]:
                if (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and
                        a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]):
                    fail.add(where, f"panels {ta!r} and {tb!r} overlap")
    overlaps(d.get("panels", []), name)
    for row in d.get("panels", []):
        if row.get("panels"):
            overlaps(row["panels"], f"{name} row {row.get('title')!r}")
    for name_ in MUST_QUERY.get(uid, []):
        if name_ not in text:
            fail.add(name, f"no panel queries {name_}")
    return ids


# --------------------------------------------------------------------------- substitution

BUILTIN = {
    "__rate_interval": RATE_INTERVAL,
    "__interval": INTERVAL,
    "__interval_ms": str(int(INTERVAL[:-1]) * 1000),
    "__range": RANGE,
    "__range_s": RANGE[:-1],
    "__range_ms": str(int(RANGE[:-1]) * 1000),
}


def substitute(expr, values):
    """`expr` with Grafana's and the dashboard's variables replaced by `values` (name->text)."""
    table = dict(BUILTIN)
    table.update(values)

    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name not in table:
            raise KeyError(f"unknown variable ${name} in {expr!r}")
        return table[name]
    return re.sub(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)", repl, expr)


def rule_text(text):
    """A rules file with every range shortened to RULE_RANGE (a subquery's step to 1s)."""
    unit = r"\d+(?:ms|s|m|h|d|w|y)"
    text = re.sub(rf"\[(?:{unit})+:(?:{unit})*\]", f"[{RULE_RANGE}:1s]", text)
    return re.sub(rf"\[(?:{unit})+\]", f"[{RULE_RANGE}]", text)


# --------------------------------------------------------------------------- processes

class Prometheus:
    def __init__(self, address):
        self.base = f"http://{address}"

    def get(self, path, **params):
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:  # 400 bad_data, 422 execution: the body says why
            return json.load(e)
        except (urllib.error.URLError, OSError) as e:  # not listening yet, or gone
            return {"status": "error", "errorType": "connection", "error": str(e)}

    def query(self, expr):
        return self.get("/api/v1/query", query=expr)

    def label_values(self, query):
        """What Grafana's label_values(selector, label) (or label_values(label)) answers."""
        m = re.fullmatch(r"label_values\((?:(.*),)?\s*(\w+)\s*\)", query.strip(), re.S)
        if not m:
            raise ValueError(f"not a label_values() query: {query!r}")
        selector, label = m.group(1), m.group(2)
        if selector is None:
            answer = self.get(f"/api/v1/label/{label}/values")
            return sorted(answer.get("data") or [])
        answer = self.get("/api/v1/series", **{"match[]": selector.strip()})
        if answer.get("status") != "success":
            raise ValueError(f"{query!r}: {answer.get('error')}")
        return sorted({s[label] for s in answer["data"] if label in s})


def die_with_parent():
    """In the child: SIGTERM when this test ends, however it ends (ctest kills it at its
    timeout), so that no agent, exporter or server outlives it."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start(argv, log, env=None):
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})}, preexec_fn=die_with_parent)


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# --------------------------------------------------------------------------- the queries

def targets_of(dashboards):
    for uid, d in dashboards:
        for p in all_panels(d.get("panels", [])):
            for t in p.get("targets") or []:
                yield uid, p, t


def run_queries(prom, dashboards, values, label, fail, require_exemplars):
    """Runs every target with `values`; returns how many answered with series."""
    answered = 0
    now = time.time()
    for uid, p, t in targets_of(dashboards):
        where = f"[{label}] {uid} / {p['title']} / {t['refId']}"
        expr = substitute(t["expr"], values)
        answer = prom.query(expr)
        if answer.get("status") != "success":
            fail.add(where, f"{answer.get('errorType')}: {answer.get('error')} in {expr!r}")
            continue
        series = answer["data"]["result"]
        key = (uid, p["title"])
        if not series:
            family = NEEDS_FAMILY.get(key) or next(
                (f for f in NEEDS_FAMILY.values() if f in expr), None)
            if family and not prom.query(f"count({family})").get("data", {}).get("result"):
                print(f"SKIP {where}: Prometheus has no {family} series (not served yet)")
                continue
            if key in MAY_BE_EMPTY:
                print(f"ok   {where}: empty, as allowed: {MAY_BE_EMPTY[key]}")
                if key in WIDENED:
                    wide = expr.replace(*WIDENED[key])
                    if wide == expr or not prom.query(wide).get("data", {}).get("result"):
                        fail.add(where, f"no series for the widened {wide!r} either")
                continue
            fail.add(where, f"no series for {expr!r}")
            continue
        answered += 1
        first = {k: v for k, v in series[0]["metric"].items() if k not in ("job", "instance")}
        print(f"ok   {where}: {len(series)} series, e.g. {first} {series[0]['value'][1]}")
        if require_exemplars and t.get("exemplar"):
            ex = prom.get("/api/v1/query_exemplars", query=expr, start=f"{now - 30:.3f}",
                          end=f"{now:.3f}")
            found = [e for s in ex.get("data") or [] for e in s.get("exemplars", [])]
            if ex.get("status") != "success" or not found:
                fail.add(where, f"no exemplars for {expr!r}: {ex.get('error', 'none stored')}")
            elif not all("request_id" in e.get("labels", {}) for e in found):
                fail.add(where, f"an exemplar without request_id: {found[0]}")
    return answered


def resolve(prom, d, fail):
    """The dashboard's variables at the values their own queries find (see the docstring)."""
    values = {}
    for v in d["templating"]["list"]:
        if v["type"] != "query":
            continue
        found = prom.label_values(substitute(variable_query(v), values))
        if not found:
            fail.add(f"{d['uid']} variable {v['name']}", f"{variable_query(v)!r} found nothing")
            values[v["name"]] = ".*"
            continue
        pick = found[0]
        if v["name"] == "job":
            pick = "xtel-exporter" if "xtel-exporter" in found else found[0]
        elif v["name"] == "agent":
            pick = next((a for a in found if a.endswith("-initiator")), found[0])
        # As Grafana formats a value for a regex matcher (a multi-value or "All" variable):
        # regex metacharacters escaped, with a PromQL string's escaped backslash.
        multi = v.get("multi") or v.get("includeAll")
        values[v["name"]] = re.sub(r"([\\^$*+?.()|{}\[\]])", r"\\\\\1", pick) if multi else pick
    return values


def all_values(d):
    return {v["name"]: ".*" for v in d["templating"]["list"] if v["type"] == "query"}


def wait_for(prom, exprs, deadline):
    """Waits until each of `exprs` has answered with series once; whether they all did."""
    started, left = time.time(), list(exprs)
    while left and time.time() < deadline:
        for e in list(left):
            if prom.query(e).get("data", {}).get("result"):
                print(f"{e}: series after {time.time() - started:.1f} s", flush=True)
                left.remove(e)
        time.sleep(0.5)
    return not left


def live(args, dashboards, fail):
    work = tempfile.mkdtemp(prefix="xtel-dashboards-")
    procs = []
    try:
        agents_dir = os.path.join(work, "agents")
        os.mkdir(agents_dir)
        log = open(os.path.join(work, "processes.log"), "w")
        env = {"NIXL_TELEMETRY_ENABLE": "y", "NIXL_TELEMETRY_EXPORTER": "node",
               "NIXL_TELEMETRY_EXPORTER_OUTPUT_PATH": agents_dir,
               "NIXL_TELEMETRY_TIMING_SAMPLE": "1", "NIXL_TELEMETRY_RUN_INTERVAL": "100",
               "XTEL_LOG_LEVEL": "warning"}
        # Small passes at depth 1, niced: the agents leave the CPUs to xtel-exporter and
        # Prometheus. The straggler goes over TCP, far slower than shared memory (its goodput
        # some 50 times under the median here; a target's registered heap memory was not slow
        # enough to be flagged every time).
        pairs = [("pair-0", {}), ("pair-1", {}), ("pair-2", {}), ("slow", {"UCX_TLS": "tcp"})]
        demos = {}  # name -> (process, its own log's path)
        for name, own in pairs:
            path = os.path.join(work, f"{name}.log")
            demos[name] = (start(["nice", "-n", "5", args.xfer_demo, "--name", name,
                                  "--op", "write", "--total", "256K", "--block", "16K",
                                  "--depth", "1", "--duration", "180"], open(path, "w"),
                                 {**env, **own}), path)
            procs.append(demos[name][0])
        exporter_port, prom_port = free_port(), free_port()
        procs.append(start([args.exporter, "--listen", f"127.0.0.1:{exporter_port}",
                            "--dir", agents_dir, "--remote-write",
                            f"http://127.0.0.1:{free_port()}/api/v1/write"], log))
        rules = []
        for f in sorted(glob.glob(os.path.join(args.source_dir, "monitoring/rules/*.rules.yaml"))):
            short = os.path.join(work, os.path.basename(f))
            with open(f) as src, open(short, "w") as dst:
                dst.write(rule_text(src.read()))
            rules.append(short)
        if not rules:
            fail.add("rules", "no monitoring/rules/*.rules.yaml")
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as c:
            c.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "  evaluation_interval: 1s\n")
            c.write("rule_files:\n" + "".join(f"  - '{r}'\n" for r in rules))
            c.write("scrape_configs:\n  - job_name: 'xtel-exporter'\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{exporter_port}']\n")
        procs.append(start([args.prometheus, f"--config.file={config}",
                            f"--storage.tsdb.path={os.path.join(work, 'data')}",
                            f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn",
                            "--enable-feature=exemplar-storage"], log))
        prom = Prometheus(f"127.0.0.1:{prom_port}")
        started = time.time()
        # The last rules of the chain: once the straggler flag and the per-peer p99 have
        # series, every rule before them has had its data.
        ready = wait_for(prom, ['up{job="xtel-exporter"} == 1', "xtel_exporter_agents >= 8",
                                "peer_operation:xtel_transfer:straggler",
                                "agent_peer_operation:xtel_transfer_duration_seconds:p99_5m",
                                'ALERTS{alertname="XtelStragglerPeer"}'],
                         started + SETTLE_S)
        print(f"rules have data after {time.time() - started:.1f} s" if ready else
              f"the rules had no data after {SETTLE_S} s; checking anyway", flush=True)
        # An agent that died leaves every rule after it short of peers: say so first, with
        # what it printed last (the sanitizers' reports among it).
        for name, (p, path) in demos.items():
            if p.poll() is not None:
                with open(path, errors="replace") as f:
                    tail = "".join(f.readlines()[-30:])
                fail.add(f"xfer_demo {name}", f"exited with {p.returncode} during the test")
                print(f"---- xfer_demo {name} exited with {p.returncode}; its last lines:\n{tail}",
                      flush=True)
        for uid, d in dashboards:
            values = resolve(prom, d, fail)
            print(f"{uid} variables: {values}")
            run_queries(prom, [(uid, d)], all_values(d), "All", fail, True)
            run_queries(prom, [(uid, d)], values, "found", fail, False)

        # The check can fail: a misspelled metric name is reported as empty.
        uid, p, t = next((u, p, t) for u, p, t in targets_of(dashboards)
                         if (u, p["title"]) not in MAY_BE_EMPTY and "xtel_" in t["expr"])
        bad = {"uid": uid, "panels": [{"title": p["title"], "targets": [
            {"refId": t["refId"], "expr": t["expr"].replace("xtel_", "xtel_misspelt_", 1)}]}]}
        caught = Failures("caught")
        run_queries(prom, [(uid, bad)], all_values(dict(dashboards)[uid]), "misspelt", caught,
                    False)
        if not caught.items:
            fail.add("self-check", "a misspelled metric name was not reported")
        else:
            print("ok   self-check: the misspelled query was reported")
        if fail.items:
            log.flush()
            with open(os.path.join(work, "processes.log")) as f:
                print("---- processes' output (last 40 lines)\n" + "".join(f.readlines()[-40:]))
    finally:
        stop(procs)
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--structure-only", action="store_true")
    ap.add_argument("--xfer-demo")
    ap.add_argument("--exporter")
    ap.add_argument("--prometheus")
    ap.add_argument("--dashboard", action="append")
    args = ap.parse_args()
    files = args.dashboard or [os.path.join(args.source_dir, "monitoring/dashboards", f)
                               for f in ("xtel-node.json", "xtel-fleet.json")]
    fail = Failures()
    dashboards = []
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                d = json.load(fh)
        except (OSError, ValueError) as e:
            fail.add(f, f"not readable JSON: {e}")
            continue
        ids = check_structure(d, os.path.basename(f), fail)
        print(f"{os.path.basename(f)}: {len(ids)} panels, "
              f"{sum(1 for _ in targets_of([(d.get('uid'), d)]))} targets")
        dashboards.append((d.get("uid"), d))
    if not args.structure_only and not fail.items:
        if not (args.xfer_demo and args.exporter and args.prometheus):
            ap.error("--xfer-demo, --exporter and --prometheus are needed without --structure-only")
        live(args, dashboards, fail)
    if fail.items:
        print(f"\n{len(fail.items)} failure(s):\n  " + "\n  ".join(fail.items))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
