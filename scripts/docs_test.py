#!/usr/bin/env python3
"""Runs every ```bash block of README.md and docs/src/*.md as written, and
checks every ```yaml block as the file it says it is.

    python3 scripts/docs_test.py --binary target/debug/skillstore [--s3 ENDPOINT]

Each block runs with `bash -euo pipefail` from the root of a scratch copy
of the repository (the files git tracks), with the given `skillstore`
first on PATH. Blocks of one file run in order in the same copy, so a
later block may use what an earlier one made. A block whose info string
says `bash norun` (the commands that build, test or benchmark the whole
project, which this test is part of) is not run. With --s3, the AWS_*
variables point at that S3-compatible server, where a bucket `skills`
is created first.

A ```yaml block's info string says what it is: `yaml config` (a
skillstore.yaml) or `yaml server` (a server file) is written into the
scratch copy's root and checked with `skillstore config check`, with the
token variables the examples name set (as `file=NAME` in the info string
names it, for the blocks after it to use); `yaml norun` is a part of a file,
shown alone. Fails, naming the file and line, on the first block that
exits non-zero or runs over 120 s, or on a yaml block that says neither.

First, every relative link of README.md, ARCHITECTURE.md and the book must
resolve: to a file of the repository, and to a heading of that file when
it names an anchor; and docs/src/SUMMARY.md must list every page.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```(bash|ya?ml)([^\n]*)\n(.*?)^```", re.S | re.M)
TOKEN_VARIABLES = ("ACME_READ_TOKEN", "GLOBEX_TOKEN", "METRICS_TOKEN", "GIT_HOOK_SECRET")


def blocks(path: Path):
    text = path.read_text()
    for m in BLOCK.finditer(text):
        line = text[: m.start()].count("\n") + 1
        yield line, m.group(1), m.group(2).split(), m.group(3)


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """The anchor GitHub and mdBook give a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set:
    text = FENCE.sub("", path.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", text, re.M)}


def broken_links() -> list:
    """Every relative link that leads nowhere, as `page: link (why)`."""
    book = ROOT / "docs" / "src"
    pages = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted(book.glob("*.md"))]
    broken = []
    for page in pages:
        for m in LINK.finditer(FENCE.sub("", page.read_text())):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            resolved = (page.parent / file).resolve() if file else page
            where = f"{page.relative_to(ROOT)}: {target}"
            if not resolved.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{where} (no such heading)")
    listed = set(re.findall(r"\]\(([^)]+\.md)\)", (book / "SUMMARY.md").read_text()))
    for page in sorted(book.glob("*.md")):
        if page.name != "SUMMARY.md" and page.name not in listed:
            broken.append(f"docs/src/SUMMARY.md: does not list {page.name}")
    return broken


def scratch_copy() -> Path:
    dest = Path(tempfile.mkdtemp(prefix="skillstore-docs-"))
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if not name or not (ROOT / name).exists():
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target, follow_symlinks=False)
    (dest / "target").mkdir()  # where a built checkout keeps its build, and the examples their scratch files
    return dest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--s3", help="an S3-compatible endpoint (http://host:port) for the S3 examples")
    args = parser.parse_args()
    broken = broken_links()
    if broken:
        print("links that lead nowhere:", *broken, sep="\n  ", file=sys.stderr)
        return 1
    binary = Path(args.binary).resolve()
    bindir = Path(tempfile.mkdtemp(prefix="skillstore-bin-"))
    (bindir / "skillstore").symlink_to(binary)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
    env.pop("RUST_LOG", None)
    env.update({name: f"docs-test-{name.lower()}" for name in TOKEN_VARIABLES})
    if args.s3:
        endpoint = args.s3.rstrip("/")
        env.update(
            AWS_ENDPOINT_URL=endpoint,
            AWS_ALLOW_HTTP="true",
            AWS_REGION="us-east-1",
            AWS_ACCESS_KEY_ID="docs-test",
            AWS_SECRET_ACCESS_KEY="docs-test",
        )
        request = urllib.request.Request(f"{endpoint}/skills", method="PUT")
        urllib.request.urlopen(request, timeout=10).close()
    pages = [ROOT / "README.md", *sorted((ROOT / "docs" / "src").glob("*.md"))]
    ran = skipped = 0
    for page in pages:
        copy = scratch_copy()
        try:
            for line, language, flags, code in blocks(page):
                where = f"{page.relative_to(ROOT)}:{line}"
                if "norun" in flags:
                    skipped += 1
                    continue
                if language != "bash":
                    if not {"config", "server"} & set(flags):
                        print(f"{where}: a yaml block says neither config, server nor norun", file=sys.stderr)
                        return 1
                    name = next((f[5:] for f in flags if f.startswith("file=")), "docs-check.yaml")
                    (copy / name).write_text(code)
                    code = f"skillstore config check {name}"
                if "s3" in flags and not args.s3:
                    print(f"{where}: needs --s3", file=sys.stderr)
                    return 1
                try:
                    result = subprocess.run(
                        ["bash", "-euo", "pipefail", "-c", code],
                        cwd=copy,
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=120,
                    )
                except subprocess.TimeoutExpired:
                    print(f"{where}: the block ran over 120 s", file=sys.stderr)
                    return 1
                if result.returncode != 0:
                    print(f"{where}: the block exited {result.returncode}", file=sys.stderr)
                    print(code, file=sys.stderr)
                    print(result.stdout[-3000:], result.stderr[-3000:], sep="\n", file=sys.stderr)
                    return 1
                ran += 1
        finally:
            shutil.rmtree(copy, ignore_errors=True)
    shutil.rmtree(bindir, ignore_errors=True)
    print(f"docs: {ran} block(s) ran or checked as written; {skipped} marked norun")
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())
