#!/usr/bin/env python3
"""MD5 of every read endpoint's answer to one kept store: a refactor changes none of them.

    answers.py build  BIN STORE   # a store from ../shared/testdata, imported with BIN
    answers.py digest BIN STORE   # a query-only BIN over a copy of STORE: one line per request

Run `digest` with the binary before and after a change and `diff` the two outputs. Every
request names its range, so the answers do not depend on the day they are asked.
"""

import gzip
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

TESTDATA = os.environ.get("STACKHOUSE_TESTDATA") or os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "testdata"
)
# Wide enough for every capture; a day boundary inside the data does not matter.
FROM_NS, TO_NS = 1_000_000_000_000_000_000, 2_000_000_000_000_000_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, store, *extra):
        self.http, self.grpc = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.http}"
        self.proc = subprocess.Popen(
            [binary, "serve", "--data-dir", store, "--http-addr", f"127.0.0.1:{self.http}",
             "--grpc-addr", f"127.0.0.1:{self.grpc}", "--retention", "0", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            try:
                urllib.request.urlopen(self.url + "/readyz", timeout=1)
                return
            except Exception:
                time.sleep(0.1)
        raise SystemExit("server did not become ready")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def request(url, body=None, headers=None):
    req = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def build(binary, store):
    files = []
    for root, _, names in os.walk(TESTDATA):
        for n in sorted(names):
            if n.endswith((".md", ".json")) and "speedscope" not in root:
                continue
            if n.startswith("invalid"):
                continue
            files.append(os.path.join(root, n))
    server = Server(binary, store)
    try:
        for f in sorted(files):
            service = os.path.basename(f).split(".")[0]
            subprocess.run([binary, "import", "--url", server.url, "--service", service,
                            "--label", "env=answers", f], check=False)
    finally:
        server.stop()


def rest(server, path, **params):
    pairs = []
    for k, v in params.items():
        for item in v if isinstance(v, list) else [v]:
            pairs.append((k, str(item)))
    return request(f"{server.url}{path}?{urllib.parse.urlencode(pairs)}")


def connect(server, method, message):
    return request(f"{server.url}/{method}", json.dumps(message).encode(),
                   {"Content-Type": "application/json"})


def digest(binary, store):
    copy = tempfile.mkdtemp(prefix="answers-")
    shutil.rmtree(copy)
    shutil.copytree(store, copy)
    server = Server(binary, copy, "--role", "query", "--query-max-range", "36500d")
    out = []

    def record(name, answer):
        status, body = answer
        if body[:2] == b"\x1f\x8b":
            body = gzip.decompress(body)
        out.append(f"{hashlib.md5(body).hexdigest()}  {status}  {name}")

    try:
        rng = {"from": FROM_NS, "to": TO_NS}
        types = json.loads(rest(server, "/api/v1/profile-types", **rng)[1])
        types = [t if isinstance(t, str) else t.get("id", t.get("profile_type")) for t in
                 (types.get("profile_types", types) if isinstance(types, dict) else types)]
        record("profile-types", rest(server, "/api/v1/profile-types", **rng))
        record("labels", rest(server, "/api/v1/labels", **rng))
        record("label values service.name", rest(server, "/api/v1/labels/service.name/values", **rng))
        record("stats", rest(server, "/api/v1/stats", **rng))
        record("openapi.json", rest(server, "/api/v1/openapi.json"))
        ms = {"start": FROM_NS // 1_000_000, "end": TO_NS // 1_000_000}
        for t in types:
            scope = {"profile_type": t, **rng}
            for fmt in ["json", "folded", "flamebearer", "pprof"]:
                record(f"flamegraph {t} {fmt}", rest(server, "/api/v1/flamegraph", format=fmt, **scope))
            record(f"flamegraph {t} max_nodes=20", rest(server, "/api/v1/flamegraph", max_nodes=20, **scope))
            record(f"flamegraph {t} group_by", rest(server, "/api/v1/flamegraph", group_by="service.name",
                                                    max_nodes=50, **scope))
            record(f"flamegraph {t} selector", rest(server, "/api/v1/flamegraph",
                                                    selector='{service.name=~"cpu.*"}', **scope))
            record(f"top {t}", rest(server, "/api/v1/top", limit=15, **scope))
            record(f"timeseries {t}", rest(server, "/api/v1/timeseries", step="2592000", group_by="service.name",
                                          **scope))
            events = rest(server, "/api/v1/events", limit=50, **scope)
            record(f"events {t}", events)
            found = json.loads(events[1]).get("events", []) if events[0] == 200 else []
            profile_id = next((e["profile_id"] for e in found if e.get("profile_id")), None)
            trace_id = next((e["trace_id"] for e in found if e.get("trace_id")), None)
            if profile_id:
                for fmt in ["json", "folded", "flamebearer", "pprof"]:
                    record(f"profile {t} {fmt}", rest(server, f"/api/v1/profiles/{profile_id}", format=fmt))
            if trace_id:
                record(f"trace {t}", rest(server, f"/api/v1/traces/{trace_id}/flamegraph", **scope))
            for fmt in ["json", "folded", "flamebearer"]:
                record(f"diff {t} {fmt}", rest(
                    server, "/api/v1/diff", profile_type=t, format=fmt,
                    baseline_selector='{service.name=~"cpu.*"}', baseline_from=FROM_NS, baseline_to=TO_NS,
                    comparison_from=FROM_NS, comparison_to=TO_NS))
            wire = t
            pt = json.loads(connect(server, "querier.v1.QuerierService/ProfileTypes", ms)[1])
            for p in pt.get("profileTypes", []):
                if p["ID"].split(":", 1)[1] == t:
                    wire = p["ID"]
            sel = {"profile_typeID": wire, "label_selector": "{}", **ms}
            for fmt in [0, 1, 2, 3]:
                record(f"SelectMergeStacktraces {t} format={fmt}", connect(
                    server, "querier.v1.QuerierService/SelectMergeStacktraces",
                    {**sel, "format": fmt, "max_nodes": 64}))
            record(f"SelectMergeProfile {t}", connect(server, "querier.v1.QuerierService/SelectMergeProfile",
                                                     {**sel, "max_nodes": 64}))
            record(f"SelectSeries {t}", connect(server, "querier.v1.QuerierService/SelectSeries",
                                               {**sel, "step": 2592000, "group_by": ["service_name"]}))
            record(f"SelectHeatmap {t}", connect(server, "querier.v1.QuerierService/SelectHeatmap",
                                                {**sel, "step": 2592000}))
            record(f"Diff {t}", connect(server, "querier.v1.QuerierService/Diff",
                                       {"left": {**sel, "label_selector": '{service_name=~"cpu.*"}'},
                                        "right": sel}))
            record(f"render {t}", request(f"{server.url}/pyroscope/render?" + urllib.parse.urlencode(
                {"query": wire + "{}", "from": ms["start"], "until": ms["end"], "format": "json"})))
        record("ProfileTypes", connect(server, "querier.v1.QuerierService/ProfileTypes", ms))
        record("LabelNames", connect(server, "querier.v1.QuerierService/LabelNames", ms))
        record("LabelValues", connect(server, "querier.v1.QuerierService/LabelValues",
                                      {"name": "service_name", **ms}))
        record("Series", connect(server, "querier.v1.QuerierService/Series",
                                 {"matchers": ['{service_name=~".+"}'], **ms}))
        record("GetProfileStats", connect(server, "querier.v1.QuerierService/GetProfileStats", {}))
        # Refusals: the same status and message, in the same order of checks.
        bad = {
            "no profile_type": ("/api/v1/flamegraph", rng),
            "unknown profile_type": ("/api/v1/top", {"profile_type": "a:b:c:d", **rng}),
            "bad profile_type": ("/api/v1/timeseries", {"profile_type": "cpu", **rng}),
            "bad selector": ("/api/v1/flamegraph", {"profile_type": types[0], "selector": "{a=", **rng}),
            "bad trace_id": ("/api/v1/events", {"profile_type": types[0], "trace_id": "zz", **rng}),
            "bad span_id": ("/api/v1/flamegraph", {"profile_type": types[0], "span_id": "12", **rng}),
            "bad range": ("/api/v1/labels", {"from": "20", "to": "10"}),
            "bad time": ("/api/v1/profile-types", {"from": "yesterday"}),
            "bad max_nodes": ("/api/v1/flamegraph", {"profile_type": types[0], "max_nodes": "0", **rng}),
            "bad format": ("/api/v1/diff", {"profile_type": types[0], "format": "svg"}),
            "bad diff range": ("/api/v1/diff", {"profile_type": types[0], "baseline_from": "x"}),
            "bad profile id": ("/api/v1/profiles/12", {}),
            "unknown profile id": ("/api/v1/profiles/" + "ab" * 16, {}),
            "bad step": ("/api/v1/timeseries", {"profile_type": types[0], "step": "0", **rng}),
        }
        for name, (path, params) in bad.items():
            record(f"refused: {name}", rest(server, path, **params))
        record("refused: Connect profile type", connect(
            server, "querier.v1.QuerierService/SelectMergeStacktraces",
            {"profile_typeID": "nope", "label_selector": "{}", **ms}))
        record("refused: Connect selector", connect(
            server, "querier.v1.QuerierService/LabelNames", {"matchers": ["{a="], **ms}))
        record("refused: render query", request(f"{server.url}/pyroscope/render?query=%7B%7D"))
    finally:
        server.stop()
        shutil.rmtree(copy, ignore_errors=True)
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("build", "digest"):
        raise SystemExit(__doc__)
    {"build": build, "digest": digest}[sys.argv[1]](sys.argv[2], sys.argv[3])
