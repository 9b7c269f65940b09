#!/usr/bin/env bash
# Builds each target's starting corpus in $1: the shared captures (../shared/testdata, or
# $STACKHOUSE_TESTDATA), the hand-written seeds/<target>/ and every past finding in
# regressions/<target>/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
data="${STACKHOUSE_TESTDATA:-$here/../../../shared/testdata}"
[ -d "$data" ] || { echo "seed.sh: no test data at $data (set STACKHOUSE_TESTDATA)" >&2; exit 1; }
for file in "$here"/fuzz_targets/*.rs; do
  target="$(basename "$file" .rs)"
  mkdir -p "$out/$target"
  for dir in "$here/seeds/$target" "$here/regressions/$target"; do
    [ -d "$dir" ] && cp -n "$dir"/* "$out/$target/" 2>/dev/null || true
  done
done
cp -n "$data"/otlp/*.pb "$out/otlp_protobuf/"
cp -n "$data"/otlp/*.json "$out/otlp_json/"
cp -n "$data"/speedscope/*.json "$out/speedscope/"
for f in "$data"/pprof/*; do
  name="$(basename "$f")"
  cp -n "$f" "$out/pprof/$name"
  cp -n "$f" "$out/body/$name"
  # Mutating inflated bytes reaches the decoder; mutating gzip mostly reaches the inflater.
  if gzip -t "$f" 2>/dev/null; then gzip -dc "$f" > "$out/pprof/$name.raw"; fi
done
for f in "$data"/jfr/*.jfr.gz; do
  gzip -dc "$f" > "$out/jfr/$(basename "$f" .gz)"
done
