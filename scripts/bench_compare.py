#!/usr/bin/env python3
"""Side-by-side figures: skillstore vs the raw-read floor vs deepagents.

    python3 scripts/bench_compare.py [--sizes 250 2500] [--runs 21] [--peer-python PY] [--no-peer]

For each size N (skills per layer) it generates the four-layer tree with the
peer harness's gen_fixture.py (once, under --work), then measures, as whole
processes with a warm page cache:

* floor:       benches/read_floor (lists the four layers, reads every SKILL.md
               whole on all cores, nothing else);
* skillstore:  `skillstore --mount /=ROOT --source /base/ ... list --json >/dev/null`;
* deepagents:  the peer harness (bench/peer/deepagents_load.py, FilesystemBackend,
               in-process load time, import excluded), unless --no-peer.

It prints medians and the ratios the targets are stated in, and the peak
resident memory of `skillstore list --json`. The floor and skillstore run
alternately (--runs pairs after two warm-up pairs), and the ratio is the
median of the per-pair ratios, so both sides see the same machine load.
deepagents takes seconds per load, so it is measured in --peer-blocks
blocks (one harness run of one warm-up and --peer-repeats timed loads,
then eleven skillstore runs); its ratio is the median over the blocks of
deepagents' median over skillstore's median in the same block.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SOURCES = ["/base/", "/user/", "/project/", "/team/"]


def build() -> tuple[Path, Path]:
    print("building the release binary first (cargo build --release)...", file=sys.stderr, flush=True)
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "skillstore"], cwd=REPO, check=True)
    out = subprocess.run(
        ["cargo", "bench", "--no-run", "--quiet", "--bench", "read_floor", "--message-format", "json"],
        cwd=REPO, check=True, capture_output=True, text=True,
    ).stdout
    floor = None
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == "read_floor":
            floor = msg.get("executable") or floor
    if floor is None:
        sys.exit("could not find the read_floor executable")
    return REPO / "target" / "release" / "skillstore", Path(floor)


def generate(peer_dir: Path, root: Path, per_layer: int) -> None:
    if (root / "expected.json").exists():
        return
    subprocess.run(
        [sys.executable, str(peer_dir / "gen_fixture.py"), str(root), "-n", str(per_layer), "--force"],
        check=True, stdout=subprocess.DEVNULL,
    )


def check_counts(floor: list[str], ours: list[str], root: Path, per_layer: int) -> str:
    """Runs the floor and skillstore once each and checks they did the work
    being timed: the floor read every SKILL.md of the four layers (it prints
    `N files, B bytes (L listed)` and fails itself when it read none), and
    skillstore listed the winners expected.json names. Exits otherwise, so a
    figure never stands for a run that read nothing."""
    said = subprocess.run(floor, check=True, capture_output=True, text=True).stdout.strip()
    read = int(said.split()[0])
    if read != 4 * per_layer:
        sys.exit(f"the floor read {read} SKILL.md files, not {4 * per_layer}: {said}")
    listed = json.loads(subprocess.run(ours, check=True, capture_output=True, text=True).stdout)
    want = len(json.loads((root / "expected.json").read_text())["skills"])
    if len(listed["skills"]) != want:
        sys.exit(f"skillstore listed {len(listed['skills'])} skills, expected.json {want}")
    return f"floor: {said}; skillstore: {len(listed['skills'])} skills"


def once(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def paired(a: list[str], b: list[str], runs: int) -> tuple[float, float, float]:
    """Runs `a` and `b` alternately, so both see the same machine load.
    Returns the median time of each and the median of the per-pair ratios
    b / a."""
    for _ in range(2):
        once(a)
        once(b)
    times_a, times_b, ratios = [], [], []
    for _ in range(runs):
        ta, tb = once(a), once(b)
        times_a.append(ta)
        times_b.append(tb)
        ratios.append(tb / ta)
    return statistics.median(times_a), statistics.median(times_b), statistics.median(ratios)


def peak_rss_mb(cmd: list[str]) -> float:
    """Peak RSS of one run, read from a fresh child's rusage."""
    probe = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", probe, *cmd], check=True, capture_output=True, text=True)
    return int(out.stdout) / 1024


def deepagents(python: str, peer_dir: Path, root: Path, repeats: int) -> float:
    out = subprocess.run(
        [python, str(peer_dir / "deepagents_load.py"), str(root), "--backend", "fs", "-q",
         "--warmup", "1", "--repeats", str(repeats)],
        check=True, capture_output=True, text=True,
    ).stdout
    result = json.loads(out)["results"]["filesystem"]
    if not result.get("matches_expected_json", True):
        sys.exit("deepagents did not match expected.json")
    return result["load_s"]["median"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[250, 2500])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--peer-python", default="/tmp/peer-venv/bin/python")
    ap.add_argument("--peer-dir", type=Path, default=REPO.parent / "shared" / "bench" / "peer")
    ap.add_argument("--work", type=Path, default=Path("/tmp/skills-fx"))
    ap.add_argument("--no-peer", action="store_true", help="skip deepagents")
    ap.add_argument("--peer-blocks", type=int, default=3)
    ap.add_argument("--peer-repeats", type=int, default=3)
    args = ap.parse_args()
    skillstore, floor = build()
    for size in args.sizes:
        root = args.work / f"n{size}"
        generate(args.peer_dir, root, size)
        ours_cmd = [str(skillstore), "--mount", f"/={root}"]
        for source in SOURCES:
            ours_cmd += ["--source", source]
        ours_cmd += ["list", "--json"]
        print(check_counts([str(floor), str(root)], ours_cmd, root, size), flush=True)
        floor_s, ours_s, ratio = paired([str(floor), str(root)], ours_cmd, args.runs)
        rss = peak_rss_mb(ours_cmd)
        line = (
            f"{size} per layer ({4 * size} SKILL.md): floor {floor_s * 1e3:.1f} ms, "
            f"skillstore {ours_s * 1e3:.1f} ms = {ratio:.2f}x floor (median of paired runs), peak RSS {rss:.1f} MB"
        )
        if not args.no_peer:
            peers, peer_ratios = [], []
            for _ in range(args.peer_blocks):
                peer_s = deepagents(args.peer_python, args.peer_dir, root, args.peer_repeats)
                ours_block = statistics.median(once(ours_cmd) for _ in range(11))
                peers.append(peer_s)
                peer_ratios.append(peer_s / ours_block)
            line += (
                f"; deepagents {statistics.median(peers) * 1e3:.0f} ms = {statistics.median(peer_ratios):.0f}x skillstore"
                f" (blocks: {', '.join(f'{r:.0f}x' for r in peer_ratios)})"
            )
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
