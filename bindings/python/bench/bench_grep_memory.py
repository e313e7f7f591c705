"""The memory of one `SkillstoreBackend.grep` over large files.

Writes FILES files of SIZE MiB (lines of 100 bytes, each holding the
pattern) into one skill of a temporary directory, then measures the
resident set of this process before the search, after it, and at its peak
during it (the kernel's high-water mark, reset just before the search).

    python bench/bench_grep_memory.py [--files 10] [--size-mib 10] [--pattern needle]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path


def status(field: str) -> int:
    """A `VmRSS`-like field of /proc/self/status, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--size-mib", type=int, default=10)
    parser.add_argument("--pattern", default="needle", help="what to search for (`absent` matches no line)")
    args = parser.parse_args()

    from skillstore.deepagents import SkillstoreBackend

    with tempfile.TemporaryDirectory() as tmp:
        skill = Path(tmp) / "big"
        skill.mkdir()
        (skill / "SKILL.md").write_text("---\nname: big\ndescription: Big files.\n---\n")
        line = b"a line that matches the word needle".ljust(99) + b"\n"
        size = args.size_mib * 1024 * 1024
        data = (line * (size // len(line) + 1))[:size]
        for i in range(args.files):
            (skill / f"data{i:02}.txt").write_bytes(data)
        del data
        backend = SkillstoreBackend(tmp)
        gc.collect()
        before = status("VmRSS")
        # Resets the high-water mark (VmHWM) to the current resident set.
        Path("/proc/self/clear_refs").write_text("5")
        started = time.perf_counter()
        result = backend.grep(args.pattern)
        seconds = time.perf_counter() - started
        peak = status("VmHWM")
        after = status("VmRSS")
        print(
            f"files={args.files} size={args.size_mib} MiB matches={len(result.matches)} "
            f"truncated={result.truncated} limit={getattr(result, 'limit', None)} "
            f"rss_before={before / 1024:.1f} MiB rss_after={after / 1024:.1f} MiB "
            f"peak_growth={(peak - before) / 1024:.1f} MiB held_after={(after - before) / 1024:.1f} MiB "
            f"seconds={seconds:.2f}"
        )


if __name__ == "__main__":
    main()
