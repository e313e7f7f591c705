#!/usr/bin/env python3
"""Compare skillstore's catalog with LangChain deepagents' on generated trees.

    python3 scripts/peer_compare.py [--sizes 25 250] [--peer-python PY] [--peer-dir DIR] [--work DIR]

For each size N it generates a four-layer tree with the peer harness's
gen_fixture.py (N skills per layer), loads it with deepagents (through
scripts/deepagents_dump.py, run by --peer-python) and with
`skillstore list --json`, and compares every skill field by field, in
order: name, path, description, license, compatibility, metadata and
allowed tools. Exits 1 on any difference.

The peer Python needs deepagents; the harness's README shows how to make
that venv (bench/peer/requirements-peer.txt).
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIELDS = ["name", "path", "description", "license", "compatibility", "metadata", "allowed_tools"]
SOURCES = ["/base/", "/user/", "/project/", "/team/"]


def generate(peer_dir: Path, root: Path, per_layer: int) -> None:
    if (root / "expected.json").exists():
        return
    subprocess.run(
        [sys.executable, str(peer_dir / "gen_fixture.py"), str(root), "-n", str(per_layer), "--force"],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def deepagents(python: str, root: Path) -> list:
    out = subprocess.run([python, str(HERE / "deepagents_dump.py"), str(root)], check=True, capture_output=True)
    return json.loads(out.stdout)


def skillstore(binary: Path, root: Path) -> list:
    args = [str(binary), "--mount", f"/={root}"]
    for source in SOURCES:
        args += ["--source", source]
    out = subprocess.run(args + ["list", "--json"], check=True, capture_output=True)
    return json.loads(out.stdout)["skills"]


def compare(theirs: list, ours: list) -> list:
    problems = []
    if len(theirs) != len(ours):
        problems.append(f"deepagents has {len(theirs)} skills, skillstore {len(ours)}")
    for i, (a, b) in enumerate(zip(theirs, ours)):
        for field in FIELDS:
            if a.get(field) != b.get(field):
                problems.append(f"#{i} {a.get('name')}: {field}: deepagents {a.get(field)!r} != skillstore {b.get(field)!r}")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[25, 250])
    ap.add_argument("--peer-python", default="/tmp/peer-venv/bin/python")
    ap.add_argument("--peer-dir", type=Path, default=REPO.parent / "shared" / "bench" / "peer")
    ap.add_argument("--work", type=Path, default=Path("/tmp/skillstore-peer"))
    ap.add_argument("--binary", type=Path, default=REPO / "target" / "release" / "skillstore")
    args = ap.parse_args()
    if not args.binary.exists():
        print("building the release binary first (cargo build --release)...", file=sys.stderr, flush=True)
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=REPO, check=True)
    failed = False
    for size in args.sizes:
        root = args.work / f"n{size}"
        generate(args.peer_dir, root, size)
        theirs, ours = deepagents(args.peer_python, root), skillstore(args.binary, root)
        problems = compare(theirs, ours)
        verdict = "identical" if not problems else f"{len(problems)} differences"
        print(f"{size} per layer: deepagents {len(theirs)} skills, skillstore {len(ours)}; "
              f"{len(FIELDS)} fields compared in order: {verdict}")
        for line in problems[:20]:
            print("  " + line)
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
