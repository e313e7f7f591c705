#!/usr/bin/env python3
"""Platform-scale tenancy: one shared base under many tenants' own layers.

Makes a base of BASE skills and TENANTS tenants of OWN skills each (local
directories, or with --s3 a bucket of a moto server), a server file whose template mounts the base at /base and the
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
- with --s3: the S3 requests the server made while idle, counted by a
  proxy in front of moto, per refresh interval and by kind (LIST, GET,
  HEAD, other): one listing of the shared base per interval, plus one per
  loaded tenant's own prefix, is the aim;
- with --rate SECONDS: `GET /v1/skills/{name}` of one loaded tenant
  hammered by `wrk` (64 connections), requests a second and p99, to set
  beside a run with `--tenants 1`;
- load_average_1m: the host's one-minute load average at the end (the
  figures above depend on what else runs).

Prints one JSON object. Example:

    python3 scripts/bench_tenants.py --binary target/release/skillstore \\
        --tenants 1000 --base 2500 --own 6 --idle 60
    python3 scripts/bench_tenants.py --tenants 100 --s3 --refresh 5s --idle 20
"""

import argparse
import hashlib
import http.client
import http.server
import re
import threading
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


def skill_text(name, description):
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nSteps for {name}.\n"


def skill(root, name, description):
    os.makedirs(os.path.join(root, name), exist_ok=True)
    with open(os.path.join(root, name, "SKILL.md"), "w") as f:
        f.write(skill_text(name, description))


class S3:
    """A moto server, a bucket `bench` in it, and a proxy in front that
    counts the requests it passes by kind."""

    def __init__(self, moto):
        self.moto_port = free_port()
        self.moto = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(self.moto_port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                self.request("PUT", "/bench")
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit("moto did not start")
        self.counts = {}
        self.lock = threading.Lock()
        outer = self

        class Proxy(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                kind = self.command
                if self.command == "GET" and re.search(r"[?&](list-type|prefix|delimiter)=", self.path):
                    # The shared base's listings apart from the tenants' own.
                    kind = "LIST base" if re.search(r"[?&]prefix=base(%2F|/|&|$)", self.path) else "LIST own"
                with outer.lock:
                    outer.counts[kind] = outer.counts.get(kind, 0) + 1
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                status, reply, answer = outer.request(self.command, self.path, body, headers)
                self.send_response(status)
                for k, v in reply:
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                if self.command != "HEAD":
                    try:
                        self.wfile.write(answer)
                    except (BrokenPipeError, ConnectionResetError):
                        pass  # the server stopped while its request was answered

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = forward

        self.proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
        threading.Thread(target=self.proxy.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.proxy.server_address[1]}"

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.moto_port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.getheaders(), r.read()
        finally:
            conn.close()

    def put_skill(self, prefix, name, description):
        status, _, _ = self.request("PUT", f"/bench/{prefix}/{name}/SKILL.md",
                                    skill_text(name, description).encode())
        assert status == 200, status

    def take_counts(self):
        with self.lock:
            counts, self.counts = self.counts, {}
        return counts

    def close(self):
        self.proxy.shutdown()
        self.moto.terminate()
        self.moto.wait(timeout=30)


def parse_seconds(text):
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    match = re.fullmatch(r"([\d.]+)(ms|s|m|h)?", text.strip())
    return float(match.group(1)) * units[match.group(2) or "s"]


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
    ap.add_argument("--s3", action="store_true", help="the base and the tenants' layers in a moto bucket")
    ap.add_argument("--moto", default="target/venvs/moto/bin/moto_server", help="the moto_server command (--s3)")
    ap.add_argument("--rate", type=int, default=0, help="seconds of wrk on one loaded tenant (0: skip)")
    args = ap.parse_args()

    scratch = tempfile.mkdtemp(prefix="skillstore-tenants-")
    s3 = S3(args.moto) if args.s3 else None
    try:
        def put(layer, name, description):
            if s3:
                s3.put_skill(layer, name, description)
            else:
                skill(os.path.join(scratch, layer), name, description)

        for i in range(args.base):
            put("base", f"base-skill-{i:05}", f"Base skill number {i}, for the platform's common tasks.")
        tokens = {}
        for t in range(args.tenants):
            name = f"team{t:05}"
            for i in range(args.own):
                put(f"teams/{name}", f"{name}-skill-{i}", f"Skill {i} of {name}.")
            # One base skill shadowed by each tenant.
            put(f"teams/{name}", "base-skill-00000", f"The base's first skill, {name}'s way.")
            tokens[name] = f"token-{name}"
        root = "s3://bench" if s3 else scratch
        metrics_token = "token-metrics"
        lines = [f"refresh_interval: {args.refresh}", "metrics_tokens:",
                 f"  - sha256: {hashlib.sha256(metrics_token.encode()).hexdigest()}", "template:", "  mounts:",
                 f"    - at: /base\n      location: {root}/base",
                 f"    - at: /team\n      location: {root}/teams/{{tenant}}",
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
        if s3:
            env.update(AWS_ENDPOINT_URL=s3.endpoint, AWS_ALLOW_HTTP="true", AWS_REGION="us-east-1",
                       AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench")
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
        idle_requests = None
        if args.idle:
            if s3:
                s3.take_counts()
            c0 = cpu_seconds(proc.pid)
            time.sleep(args.idle)
            idle = (cpu_seconds(proc.pid) - c0) * 60 / args.idle
            if s3:
                counts = s3.take_counts()
                intervals = args.idle / parse_seconds(args.refresh)
                idle_requests = {
                    "intervals": round(intervals, 2),
                    "per_interval": {k: round(v / intervals, 1) for k, v in sorted(counts.items())},
                }
        rate = None
        if args.rate:
            name, token = next(iter(tokens.items()))
            out = subprocess.run(["wrk", "-t2", "-c64", f"-d{args.rate}s", "--latency",
                                  "-H", f"Authorization: Bearer {token}", f"{url}/v1/skills/{name}-skill-0"],
                                 capture_output=True, text=True, check=True).stdout
            rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
            p99 = re.search(r"99%\s+([\d.]+\w+)", out).group(1)
            rate = {"requests_per_s": round(rps), "p99": p99}
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
            "idle_s3_requests": idle_requests,
            "show_rate": rate,
            "refresh": args.refresh,
            "load_average_1m": round(os.getloadavg()[0], 2),
        }))
    finally:
        if s3:
            s3.close()
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
