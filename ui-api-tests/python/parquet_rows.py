"""Reads every segment object under a store directory with DuckDB, a Parquet reader
independent of Stackhouse's, and prints its rows as JSON: the deletion tests compare them
with what the test sent.

Usage: parquet_rows.py STORE_DIR

Output: {"samples": [[series_id, time_nanos, value], ...], "rollup_1m": [...],
"rollup_1h": [...], "rollup_1d": [...], "totals_1m": [...], "totals_1h": [...],
"totals_1d": [...], "files": {"samples": N, ...}},
the rows of every object of each kind found under STORE_DIR/tenants/*/segments/*/.
"""

import glob
import json
import os
import sys

import duckdb

KINDS = ("samples", "rollup_1m", "rollup_1h", "rollup_1d", "totals_1m", "totals_1h", "totals_1d")


def main():
    root = sys.argv[1]
    out = {"files": {}}
    con = duckdb.connect()
    for kind in KINDS:
        files = sorted(glob.glob(os.path.join(root, "tenants", "*", "segments", "*", f"{kind}.parquet")))
        out["files"][kind] = len(files)
        rows = []
        for f in files:
            try:
                found = con.execute(
                    "SELECT series_id, time_nanos, value FROM read_parquet(?)", [f]
                ).fetchall()
            except duckdb.Error:
                # The server's cleanup may delete a replaced object between the listing
                # and the read; the caller reads again until the store settles.
                if os.path.exists(f):
                    raise
                continue
            rows.extend([int(s), int(t), int(v)] for s, t, v in found)
        out[kind] = rows
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
