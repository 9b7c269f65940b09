#!/usr/bin/env bash
# Runs every fuzz target for $FUZZ_SECONDS (default 15) from its seed corpus: CI's smoke,
# and with a larger FUZZ_SECONDS a campaign. libFuzzer through cargo-fuzz on the stable
# toolchain (RUSTC_BOOTSTRAP=1 unlocks the sanitizer-coverage flags it passes). A target
# that crashes leaves the input in $work/artifacts/<target>/ and fails the run.
#
#   api/fuzz/smoke.sh [target...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$HOME/.cache/stackhouse-ci/fuzz-target}"
work="${FUZZ_WORK:-$CARGO_TARGET_DIR/work}"
seconds="${FUZZ_SECONDS:-15}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list --fuzz-dir api/fuzz)
"$here/seed.sh" "$work/corpus"
# -s none: Rust code needs no AddressSanitizer to find panics, overflows and hangs, and
# runs several times faster without it; -a keeps debug assertions and overflow checks on.
# 16 codegen units: the DataFusion stack builds in a fraction of the time of one unit.
fuzz=(--fuzz-dir api/fuzz --features libfuzzer -s none -a --codegen-units 16)
cargo fuzz build "${fuzz[@]}"
for target in "${targets[@]}"; do
  mkdir -p "$work/artifacts/$target"
  log="$work/artifacts/$target.log"
  echo "== $target: ${seconds}s"
  status=0
  cargo fuzz run "${fuzz[@]}" "$target" "$work/corpus/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=1048576 \
    -artifact_prefix="$work/artifacts/$target/" -print_final_stats=1 >"$log" 2>&1 || status=$?
  grep -E "^(#[0-9]+ +(INITED|DONE)|stat::(number_of_executed_units|new_units_added|peak_rss_mb)|Done [0-9]+ runs)" "$log" || true
  if [ "$status" -ne 0 ]; then
    grep -E -A 20 "panicked|ERROR: libFuzzer|SUMMARY" "$log" | head -n 40
    echo "fuzz target $target failed (exit $status); the input is in $work/artifacts/$target/"
    exit 1
  fi
done
