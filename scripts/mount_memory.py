#!/usr/bin/env python3
"""The resident memory of a `skillstore mount` daemon holding many handles.

    python3 scripts/mount_memory.py BINARY [--handles 100] [--mib 10] [--runs 5]

Needs /dev/fuse and root (or fusermount3). Each run makes a tree with one
skill holding a file of MIB MiB, mounts it with BINARY, lists the file's
directory, changes the file (so the listing's version is stale, the case
that used to read and keep one copy per handle), opens HANDLES handles on
it and reads each whole, and samples the daemon's VmRSS before and after.
Then, with every handle still open and a shell's working directory inside
the tree, it sends SIGTERM and records the exit code and whether the mount
point is an ordinary directory again. Prints each run and the median and
range of the growth.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

SKILL_MD = "---\nname: big\ndescription: One large file.\n---\n\n# big\n"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def mounted(path: str) -> bool:
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo") as info:
        return any(line.split(" ")[4] == real for line in info)


def run(binary: str, handles: int, mib: int) -> dict:
    with tempfile.TemporaryDirectory() as work:
        tree = os.path.join(work, "tree")
        os.makedirs(os.path.join(tree, "big", "assets"))
        with open(os.path.join(tree, "big", "SKILL.md"), "w") as f:
            f.write(SKILL_MD)
        blob = os.path.join(tree, "big", "assets", "blob.bin")
        with open(blob, "wb") as f:
            f.write(b"a" * (mib << 20))
        mnt = os.path.join(work, "mnt")
        os.mkdir(mnt)
        daemon = subprocess.Popen(
            [binary, "--mount", f"/={tree}", "--source", "/", "mount", mnt],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            for _ in range(500):
                if mounted(mnt) and os.listdir(mnt):
                    break
                time.sleep(0.01)
            else:
                raise RuntimeError("the tree was not mounted: " + daemon.stderr.read().decode())
            os.listdir(os.path.join(mnt, "big", "assets"))
            with open(blob, "wb") as f:
                f.write(b"z" * (mib << 20))
            before = rss_kib(daemon.pid)
            held = []
            for _ in range(handles):
                f = open(os.path.join(mnt, "big", "assets", "blob.bin"), "rb")
                assert len(f.read()) == mib << 20
                held.append(f)
            after = rss_kib(daemon.pid)
            inside = subprocess.Popen(["sleep", "30"], cwd=os.path.join(mnt, "big"))
            daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(timeout=30)
            try:
                detached = not mounted(mnt) and os.listdir(mnt) == []
            except OSError:
                detached = False
            inside.kill()
            inside.wait()
            for f in held:
                f.close()
            return {"before_kib": before, "after_kib": after, "exit": code, "detached": detached}
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
            if mounted(mnt):
                subprocess.run(["umount", "-l", mnt], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--handles", type=int, default=100)
    parser.add_argument("--mib", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    growth = []
    for i in range(args.runs):
        result = run(args.binary, args.handles, args.mib)
        growth.append((result["after_kib"] - result["before_kib"]) / 1024)
        print(
            f"run {i + 1}: RSS {result['before_kib'] / 1024:.1f} -> {result['after_kib'] / 1024:.1f} MiB "
            f"with {args.handles} handles; SIGTERM inside: exit {result['exit']}, "
            f"mount point an ordinary directory again: {result['detached']}"
        )
    print(
        f"growth: median {statistics.median(growth):.1f} MiB, "
        f"min {min(growth):.1f}, max {max(growth):.1f} ({args.runs} runs)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
