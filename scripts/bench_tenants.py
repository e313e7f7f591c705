#!/usr/bin/env python3
"""Platform-scale tenancy: one shared base under many tenants' own layers.

Makes a base of BASE skills and TENANTS tenants of OWN skills each (local
directories), a server file whose template mounts the base at /base and the
tenant's own directory at /team, starts `skillstore serve --tenants FILE`,
and measures:

- ready: seconds from start to the first `/readyz` 200;
- rss_mib: resident memory once every tenant answered one `GET /v1/skills`
  (so every tenant is loaded, whether the server loads them at start or on
  demand), and the peak;
- first_ms: the median and 95th percentile time of each tenant's first
  `GET /v1/skills/{name}`;
- idle_cpu: CPU seconds the server used per minute while idle for
  IDLE seconds, with the given refresh interval;
- load_average_1m: the host's one-minute load average at the end (the
  figures above depend on what else runs).

Prints one JSON object. Example:

    python3 scripts/bench_tenants.py --binary target/release/skillstore \\
        --tenants 1000 --base 2500 --own 6 --idle 60
"""

import argparse
import hashlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def skill(root, name, description):
    os.makedirs(os.path.join(root, name), exist_ok=True)
    with open(os.path.join(root, name, "SKILL.md"), "w") as f:
        f.write(f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nSteps for {name}.\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def fetch(url, token):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=60) as r:
        return r.status, r.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="target/release/skillstore")
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--base", type=int, default=2500)
    ap.add_argument("--own", type=int, default=6)
    ap.add_argument("--idle", type=int, default=60, help="seconds to watch idle CPU (0: skip)")
    ap.add_argument("--refresh", default="30s")
    ap.add_argument("--extra", default="", help="YAML lines added to the server file's top level")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = ap.parse_args()

    scratch = tempfile.mkdtemp(prefix="skillstore-tenants-")
    try:
        base = os.path.join(scratch, "base")
        for i in range(args.base):
            skill(base, f"base-skill-{i:05}", f"Base skill number {i}, for the platform's common tasks.")
        tokens = {}
        for t in range(args.tenants):
            name = f"team{t:05}"
            own = os.path.join(scratch, "teams", name)
            for i in range(args.own):
                skill(own, f"{name}-skill-{i}", f"Skill {i} of {name}.")
            # One base skill shadowed by each tenant.
            skill(own, "base-skill-00000", f"The base's first skill, {name}'s way.")
            tokens[name] = f"token-{name}"
        lines = [f"refresh_interval: {args.refresh}", "template:", "  mounts:",
                 f"    - at: /base\n      location: {base}",
                 f"    - at: /team\n      location: {os.path.join(scratch, 'teams', '{tenant}')}",
                 "  sources:", "    - path: /base", "    - path: /team", "tenants:"]
        for name, token in tokens.items():
            digest = hashlib.sha256(token.encode()).hexdigest()
            lines.append(f"  - name: {name}\n    tokens:\n      - sha256: {digest}")
        if args.extra:
            lines.insert(0, args.extra)
        server_file = os.path.join(scratch, "server.yaml")
        with open(server_file, "w") as f:
            f.write("\n".join(lines) + "\n")

        port = free_port()
        env = dict(os.environ, RUST_LOG="warn", SKILLSTORE_CACHE_DIR=os.path.join(scratch, "cache"))
        started = time.monotonic()
        proc = subprocess.Popen([args.binary, "serve", "--tenants", server_file, "--listen", f"127.0.0.1:{port}"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        url = f"http://127.0.0.1:{port}"
        ready = None
        while ready is None:
            if proc.poll() is not None:
                sys.exit(f"the server exited: {proc.stderr.read().decode()}")
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        ready = time.monotonic() - started
            except Exception:
                time.sleep(0.02)
        rss_ready, _ = rss_mib(proc.pid)

        firsts = []
        for name, token in tokens.items():
            t0 = time.monotonic()
            status, _ = fetch(f"{url}/v1/skills/{name}-skill-0", token)
            firsts.append((time.monotonic() - t0) * 1e3)
            assert status == 200, (name, status)
        for name, token in tokens.items():
            status, body = fetch(f"{url}/v1/skills", token)
            listed = json.loads(body)["skills"]
            assert len(listed) == args.base + args.own, (name, len(listed))
        rss_all, peak = rss_mib(proc.pid)

        idle = None
        if args.idle:
            c0 = cpu_seconds(proc.pid)
            time.sleep(args.idle)
            idle = (cpu_seconds(proc.pid) - c0) * 60 / args.idle
        proc.terminate()
        proc.wait(timeout=30)
        firsts.sort()
        print(json.dumps({
            "tenants": args.tenants,
            "base": args.base,
            "own": args.own,
            "ready_s": round(ready, 3),
            "rss_ready_mib": round(rss_ready, 1),
            "rss_all_loaded_mib": round(rss_all, 1),
            "rss_peak_mib": round(peak, 1),
            "first_show_ms_p50": round(statistics.median(firsts), 2),
            "first_show_ms_p95": round(firsts[int(len(firsts) * 0.95) - 1], 2),
            "idle_cpu_s_per_min": None if idle is None else round(idle, 2),
            "refresh": args.refresh,
            "load_average_1m": round(os.getloadavg()[0], 2),
        }))
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
