#!/usr/bin/env python3
"""Two builds' read times, side by side on one machine: A B A B over copies of one store.

    ab.py store BIN STORE        # 40 imports of the shared eBPF capture (8 services, 40 hosts)
    ab.py run BEFORE AFTER STORE [--pairs 20] [--requests 100]

`run` starts each binary as a query-only server over its own copy of STORE, checks that
both answer every read with the same bytes, then takes turns: each turn makes `--requests`
sequential requests of one read to one server and times them. It prints, per read, the
median turn of each build and the median of the pairs' after/before ratios, which is what
to read on a noisy machine: a pair's two turns ran moments apart.
"""

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from answers import TESTDATA, Server, request  # noqa: E402

FROM_NS, TO_NS = 1_000_000_000_000_000_000, 2_000_000_000_000_000_000


def build_store(binary, store):
    os.makedirs(store, exist_ok=True)
    server = Server(binary, store, "--flush-interval", "100ms")
    try:
        capture = os.path.join(TESTDATA, "otlp", "ebpf-cpu-offcpu.v1_10.pb")
        for i in range(40):
            subprocess.run([binary, "import", "--url", server.url, "--service", f"svc-{i % 8}",
                            "--label", f"host.name=host-{i}", capture], check=True,
                           stdout=subprocess.DEVNULL)
    finally:
        server.stop()


def reads(server):
    """(name, url, body, headers) of each read timed."""
    rng = f"from={FROM_NS}&to={TO_NS}"
    types = json.loads(request(f"{server.url}/api/v1/profile-types?{rng}")[1])["profile_types"]
    rest_type = types[0]["id"] if isinstance(types[0], dict) else types[0]
    connect = json.loads(request(
        f"{server.url}/querier.v1.QuerierService/ProfileTypes",
        json.dumps({"start": FROM_NS // 1_000_000, "end": TO_NS // 1_000_000}).encode(),
        {"content-type": "application/json"})[1])["profileTypes"]
    stacks = {
        "profileTypeID": connect[0]["ID"], "labelSelector": "{}",
        "start": FROM_NS // 1_000_000, "end": TO_NS // 1_000_000, "maxNodes": 16384,
    }
    base = f"{server.url}/api/v1/flamegraph?profile_type={rest_type}&{rng}"
    return [
        ("GET /api/v1/flamegraph (json)", base, None, {}),
        ("GET /api/v1/flamegraph (flamebearer)", base + "&format=flamebearer", None, {}),
        ("GET /api/v1/flamegraph (folded)", base + "&format=folded", None, {}),
        ("Connect SelectMergeStacktraces (json, max_nodes 16384)",
         f"{server.url}/querier.v1.QuerierService/SelectMergeStacktraces",
         json.dumps(stacks).encode(), {"content-type": "application/json"}),
    ]


def turn(read, n):
    _, url, body, headers = read
    start = time.perf_counter()
    for _ in range(n):
        status, _ = request(url, body, headers)
        assert status == 200, (url, status)
    return time.perf_counter() - start


def run(before, after, store, pairs, n):
    copies, servers = [], []
    try:
        for binary in (before, after):
            copy = tempfile.mkdtemp(prefix="ab-")
            shutil.rmtree(copy)
            shutil.copytree(store, copy)
            copies.append(copy)
            servers.append(Server(binary, copy, "--role", "query", "--query-max-range", "36500d"))
        plans = [reads(s) for s in servers]
        for a, b in zip(*plans):
            digests = [hashlib.md5(request(r[1], r[2], r[3])[1]).hexdigest() for r in (a, b)]
            assert digests[0] == digests[1], f"{a[0]}: the builds answer differently {digests}"
            print(f"{a[0]}: same answer from both builds (md5 {digests[0]})")
        for a, b in zip(*plans):
            turn(a, 5), turn(b, 5)
            times = ([], [])
            for _ in range(pairs):
                times[0].append(turn(a, n))
                times[1].append(turn(b, n))
            ratios = [y / x for x, y in zip(*times)]
            print(f"| {a[0]}, {n} requests | {statistics.median(times[0]):.3f} s | "
                  f"{statistics.median(times[1]):.3f} s | {statistics.median(ratios):.2f} "
                  f"({min(ratios):.2f}–{max(ratios):.2f}) |")
    finally:
        for s in servers:
            s.stop()
        for c in copies:
            shutil.rmtree(c, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    opts = {"--pairs": 20, "--requests": 100}
    for k in list(opts):
        if k in args:
            i = args.index(k)
            opts[k] = int(args[i + 1])
            del args[i:i + 2]
    if args[:1] == ["store"] and len(args) == 3:
        build_store(args[1], args[2])
    elif args[:1] == ["run"] and len(args) == 4:
        run(args[1], args[2], args[3], opts["--pairs"], opts["--requests"])
    else:
        raise SystemExit(__doc__)
