#!/usr/bin/env bash
# Runs every fuzz target for a set time (default 600 s each) and prints the
# executions and findings of each. Needs the nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz`). Not part of CI.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(vpath frontmatter frontmatter_differential catalog_memory)

cd "$(dirname "$0")/../fuzz"
mkdir -p corpus/frontmatter logs
for skill in ../examples/skills/*/*/SKILL.md; do
    cp "$skill" "corpus/frontmatter/seed-$(basename "$(dirname "$skill")")"
done

for target in "${targets[@]}"; do
    mkdir -p "corpus/$target" "artifacts/$target"
    echo "== $target: ${seconds}s"
    cargo +nightly fuzz run "$target" -O "corpus/$target" -- \
        -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="artifacts/$target/" \
        >"logs/$target.log" 2>&1 || echo "   $target stopped with a finding (see fuzz/logs/$target.log)"
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "logs/$target.log" | sed 's/^/   /'
    found=$(find "artifacts/$target" -type f | wc -l)
    echo "   findings kept in fuzz/artifacts/$target: $found"
done
