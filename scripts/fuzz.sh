#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ (each name `cargo fuzz list` gives, so a
# new target runs without being named here) for SECONDS each, one after the
# other, prints the executions of each, and fails naming the target and the
# input when one finds a crash, a leak or a timeout.
#
#   scripts/fuzz.sh [--ci] [SECONDS] [TARGET...]     (SECONDS: 600 by default)
#
# Each target starts from its corpus kept in the repository,
# fuzz/corpus/TARGET (written by fuzz/make_corpus.py), copied into a working
# corpus under target/fuzz/. The working corpus, target/fuzz/corpus/TARGET,
# is kept and grows from run to run; with --ci (scripts/test.sh) it is a
# fresh copy of the committed one. Failing inputs go to
# target/fuzz/artifacts/TARGET/, each run's output to
# target/fuzz/logs/TARGET.log. The repository's files are never written: the
# fuzz crate is built from a copy in target/fuzz/crate, so a fuzz/Cargo.lock
# behind the workspace's dependencies is brought up to date in the copy only.
#
# Installs what it needs: cargo-fuzz into target/tools, and the nightly
# toolchain with rustup when it is missing. The targets are built with
# AddressSanitizer on nightly; where no nightly toolchain can be had, with
# the default toolchain and no sanitizer (panics, timeouts and memory limits
# are still found), and the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."

ci=false
if [ "${1:-}" = --ci ]; then
  ci=true
  shift
fi
seconds=${1:-600}
shift || true

cargo_fuzz_version=0.13.2
if [ ! -x target/tools/bin/cargo-fuzz ] || [ "$(target/tools/bin/cargo-fuzz --version)" != "cargo-fuzz $cargo_fuzz_version" ]; then
  cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked --root target/tools --quiet
fi
export PATH="$PWD/target/tools/bin:$PATH"

toolchain=+nightly
sanitizer=address
if ! cargo +nightly --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal || true
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: no nightly toolchain; building with $(cargo --version) and no sanitizer"
  toolchain=
  sanitizer=none
fi

work=target/fuzz
crate=$work/crate
mkdir -p "$crate" "$work/logs"
# The fuzz crate as committed, its dependency on the workspace made absolute;
# modification times kept, so that an unchanged target is not built again.
cp -p fuzz/Cargo.toml fuzz/Cargo.lock "$crate"/
rm -rf "$crate/fuzz_targets"
cp -rp fuzz/fuzz_targets "$crate"/
sed -i "s|path = \"\\.\\.\"|path = \"$PWD\"|" "$crate/Cargo.toml"
grep -q "path = \"$PWD\"" "$crate/Cargo.toml" || {
  echo "fuzz: fuzz/Cargo.toml names the workspace other than as path = \"..\"" >&2
  exit 1
}

# `cargo $toolchain` with an empty toolchain is plain `cargo`.
fuzz() { cargo ${toolchain:+"$toolchain"} fuzz "$1" --fuzz-dir "$crate" "${@:2}"; }

targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(fuzz list)
triple=$(rustc ${toolchain:+"$toolchain"} -vV | sed -n 's/^host: //p')

start=$SECONDS
# No target named: one build of them all.
builds=("${@:-}")
for target in "${builds[@]}"; do
  if ! fuzz build --sanitizer "$sanitizer" --target-dir "$work" ${target:+"$target"} >"$work/logs/build.log" 2>&1; then
    tail -n 40 "$work/logs/build.log" >&2
    echo "fuzz: building the fuzz targets failed (whole output: $work/logs/build.log)" >&2
    exit 1
  fi
done
echo "   built ${#targets[@]} target(s) in $((SECONDS - start)) s ($sanitizer sanitizer)"
if ! cmp -s fuzz/Cargo.lock "$crate/Cargo.lock"; then
  echo "   note: fuzz/Cargo.lock is behind the workspace's dependencies (the build updated its copy, $crate/Cargo.lock)"
fi

failed=()
for target in "${targets[@]}"; do
  corpus=$work/corpus/$target artifacts=$work/artifacts/$target log=$work/logs/$target.log
  if $ci; then
    corpus=$work/ci/corpus/$target artifacts=$work/ci/artifacts/$target
    rm -rf "$corpus" "$artifacts"
  fi
  mkdir -p "$corpus" "$artifacts"
  if [ -d "fuzz/corpus/$target" ]; then
    cp -n fuzz/corpus/"$target"/* "$corpus"/ 2>/dev/null || true
  fi
  inputs=$(find "$corpus" -type f | wc -l)
  status=0
  ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0 \
    "$work/$triple/release/$target" "$corpus" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "   $target: $seconds s, ${runs:-?} executions, corpus $inputs -> $(find "$corpus" -type f | wc -l) inputs"
  if [ "$status" != 0 ]; then
    failed+=("$target")
    input=$(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)
    echo "fuzz: $target FAILED (exit $status) on the input ${input:-(none written)}" >&2
    echo "      reproduce: $work/$triple/release/$target ${input:-}; whole output: $log" >&2
    grep -m 1 -A 25 -E "panicked at|==ERROR|ERROR: libFuzzer|Sanitizer" "$log" | grep -v '^ *[0-9]*: \|^ *at ' | sed 's/^/      | /' >&2 \
      || tail -n 25 "$log" >&2
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) found failing inputs: ${failed[*]}" >&2
  exit 1
fi
