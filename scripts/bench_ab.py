#!/usr/bin/env python3
"""Two builds of the command on the same tree, in alternating runs.

    python3 scripts/bench_ab.py BEFORE AFTER TREE [--runs 60] [--rounds 3] [--locked | --locked-after]

TREE is a four-layer tree from the peer harness's gen_fixture.py. Each run
is the whole process `BINARY --mount /=TREE --source /base/ ... list --json`
with its output discarded; the two binaries take turns (the order flips
every pair), so both see the same machine load. Before timing, both outputs
must be byte-identical. Prints, per round, each binary's median, quartiles
and minimum, and the ratio of the medians (AFTER over BEFORE).

With --locked, BEFORE writes a lock of the tree (`lock`) into a scratch
directory first, and every run is `--locked ... list --json` there: what a
one-shot command pays to check every winner against a lock.

With --locked-after, only AFTER's runs are `--locked` (BEFORE's are plain
loads) and the outputs are not compared: given the same binary twice, the
ratio is what a one-shot locked command costs against a plain one. With
the local cache on, the untimed first run keeps the file hashes that the
timed runs take.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("tree")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--locked", action="store_true", help="check every winner against a lock written first")
    parser.add_argument("--locked-after", action="store_true", help="only AFTER checks against the lock")
    args = parser.parse_args()

    mounts = ["--mount", f"/={args.tree}"]
    for layer in ("base", "user", "project", "team"):
        mounts += ["--source", f"/{layer}/"]
    flags = [*mounts, "list", "--json"]
    scratch = tempfile.TemporaryDirectory(prefix="bench-ab-")
    cwd = scratch.name
    if args.locked or args.locked_after:
        subprocess.run([args.before, *mounts, "lock"], cwd=cwd, stdout=subprocess.DEVNULL, check=True)
    runs = {
        "before": [args.before, *(["--locked"] if args.locked else []), *flags],
        "after": [args.after, *(["--locked"] if args.locked or args.locked_after else []), *flags],
    }

    outputs = {name: subprocess.run(argv, capture_output=True, check=True, cwd=cwd).stdout for name, argv in runs.items()}
    if not args.locked_after and outputs["before"] != outputs["after"]:
        print("the two builds print different catalogs", file=sys.stderr)
        return 1

    for round_ in range(1, args.rounds + 1):
        times = {name: [] for name in runs}
        for i in range(args.runs):
            order = list(runs.items())
            if i % 2:
                order.reverse()
            for name, argv in order:
                started = time.perf_counter()
                subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, cwd=cwd)
                times[name].append(time.perf_counter() - started)
        print(f"round {round_}:")
        for name, values in times.items():
            q1, _, q3 = statistics.quantiles(values, n=4)
            print(
                f"  {name}: median {statistics.median(values) * 1e3:.1f} ms,"
                f" quartiles {q1 * 1e3:.1f}-{q3 * 1e3:.1f}, min {min(values) * 1e3:.1f}"
            )
        ratio = statistics.median(times["after"]) / statistics.median(times["before"])
        print(f"  after/before: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
