#!/usr/bin/env python3
"""Soak `skillstore serve` on loopback: legitimate traffic for two tenants
beside hostile anonymous and authenticated clients, for a bounded time.

Usage: python3 scripts/soak_serve.py [--duration 60] [--binary PATH] [--json FILE]

Starts the server (target/release/skillstore unless --binary) with three
tenants: `acme` and `globex` (legitimate, 40 skills each, `acme`'s team
layer writable) and `evil`, whose skills hold directory links (`a -> .`,
`b -> .`), a link out of the skill, a FIFO and an 11 MiB file. Then, for
--duration seconds:

legitimate (one thread each, keep-alive connections):
  reads        GET /v1/skills (If-None-Match), GET /v1/skills/NAME, GET a file, per tenant
  mcp          an MCP session per tenant: skills/list, tools/call read_skill_file,
               resources/read; closed (DELETE) and opened again every 50 calls
  writes       a PUT of a file in acme's writable layer every 2 s (If-Match)
hostile (bounded in count, each reconnecting when closed):
  slow headers     32 connections sending a header byte a second
  idle             32 connections that connect and say nothing
  slow bodies      16 anonymous PUTs declaring 1 MiB and sending a byte a second,
                   4 more with evil's write token
  session flood    evil's read token opening MCP sessions (at most 20 a second)
  amplification    evil reading its hostile skills (show, skills/list, the big file)
  refresh storm    40 concurrent POST /v1/refresh from evil, once a second

Prints the legitimate clients' p50/p99 latency and error count per kind,
RSS every 5 s, open connections and MCP sessions (from /metrics), and
exits 1 if any legitimate request failed, if any client thread (legitimate
or hostile) died of an exception or was still running well after the
deadline, if a legitimate client made fewer successful requests than its
floor (see `floors`: a soak with no traffic proves nothing), or if a
hostile kind never ran once. Every request goes to 127.0.0.1 only, and
every loop stops at the deadline.
"""

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOKENS = {
    "acme": "acme-soak-token",
    "globex": "globex-soak-token",
    "evil": "evil-soak-token",
    "evil_read": "evil-soak-read-token",
    "metrics": "metrics-soak-token",
}
SKILLS = 40


def skill_md(name: str, description: str) -> str:
    body = "\n".join(f"Step {n}: do the thing carefully, then check it." for n in range(12))
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\n{body}\n"


def make_tree(root: Path) -> None:
    for tenant in ["acme", "globex"]:
        for layer in ["base", "team"]:
            for i in range(SKILLS):
                skill = root / tenant / layer / f"skill-{i}"
                (skill / "references").mkdir(parents=True, exist_ok=True)
                (skill / "SKILL.md").write_text(skill_md(f"skill-{i}", f"Skill {i} of {tenant}, {layer} layer."))
                (skill / "references" / "guide.md").write_text(f"# Guide {i}\n" + "text\n" * 50)
    evil = root / "evil" / "base"
    for i in range(4):
        skill = evil / f"loop-{i}"
        skill.mkdir(parents=True, exist_ok=True)
        (skill / "SKILL.md").write_text(skill_md(f"loop-{i}", "Directory links and worse."))
        os.symlink(".", skill / "a")
        os.symlink(".", skill / "b")
        os.symlink("../../../acme/base/skill-0/SKILL.md", skill / "borrowed.md")
        os.mkfifo(skill / "pipe")
        with open(skill / "big.bin", "wb") as f:
            f.truncate(11 * 1024 * 1024)
    big = evil / "big"
    big.mkdir()
    (big / "SKILL.md").write_text(skill_md("big", "A large file."))
    (big / "data.bin").write_bytes(os.urandom(4 * 1024 * 1024))
    (root / "evil" / "team").mkdir(parents=True)
    (root / "server.yaml").write_text(
        "refresh_interval: 10s\n"
        "limits:\n  mcp_session_idle: 20s\n"
        "metrics_tokens: [{env: SOAK_METRICS}]\n"
        "tenants:\n"
        "  - name: acme\n    tokens: [{env: SOAK_ACME, scope: write}]\n"
        "    config: {mounts: [{at: /, location: acme}], sources: [{path: /base}, {path: /team, writable: true}]}\n"
        "  - name: globex\n    tokens: [{env: SOAK_GLOBEX}]\n"
        "    config: {mounts: [{at: /, location: globex}], sources: [{path: /base}, {path: /team}]}\n"
        "  - name: evil\n    tokens: [{env: SOAK_EVIL, scope: write}, {env: SOAK_EVIL_READ}]\n"
        "    config: {mounts: [{at: /, location: evil}], sources: [{path: /base}, {path: /team, writable: true}]}\n"
    )


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = {}
        self.errors: dict[str, list[str]] = {}
        self.hostile: dict[str, int] = {}
        # Successful requests per legitimate client ("read acme", ...).
        self.clients: dict[str, int] = {}
        # Client threads that ended with an exception, by name.
        self.died: dict[str, str] = {}

    def ok(self, kind: str, seconds: float, client: str | None = None) -> None:
        with self.lock:
            self.latency.setdefault(kind, []).append(seconds)
            if client is not None:
                self.clients[client] = self.clients.get(client, 0) + 1

    def register(self, client: str) -> None:
        with self.lock:
            self.clients.setdefault(client, 0)

    def death(self, thread: str, what: str) -> None:
        with self.lock:
            self.died[thread] = what

    def error(self, kind: str, what: str) -> None:
        with self.lock:
            self.errors.setdefault(kind, []).append(what)

    def count(self, kind: str) -> None:
        with self.lock:
            self.hostile[kind] = self.hostile.get(kind, 0) + 1


class Client:
    """A keep-alive connection that reconnects once when the server closed it."""

    def __init__(self, port: int, token: str):
        self.port = port
        self.token = token
        self.conn = None

    def request(self, method: str, path: str, body=None, headers=None):
        headers = dict(headers or {})
        headers["Authorization"] = f"Bearer {self.token}"
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                data = response.read()
                return response.status, response.headers, data
            except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine, BrokenPipeError):
                # A kept-alive connection the server closed between requests
                # (its idle bound): open a new one, once.
                self.conn.close()
                self.conn = None
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")


def timed(stats: Stats, kind: str, call, ok_statuses=(200, 304), client: str | None = None):
    started = time.perf_counter()
    try:
        status, headers, data = call()
    except Exception as e:  # noqa: BLE001 - every failure of a legitimate call counts
        stats.error(kind, repr(e))
        return None
    elapsed = time.perf_counter() - started
    if status not in ok_statuses:
        stats.error(kind, f"{status} {data[:200]!r}")
        return None
    stats.ok(kind, elapsed, client)
    return status, headers, data


def reads(port: int, tenant: str, stats: Stats, deadline: float) -> None:
    client = Client(port, TOKENS[tenant])
    me = f"read {tenant}"
    stats.register(me)
    tag = None
    while time.time() < deadline:
        headers = {"If-None-Match": tag} if tag else {}
        got = timed(stats, "read", lambda: client.request("GET", "/v1/skills", headers=headers), client=me)
        if got and got[0] == 200:
            tag = got[1].get("ETag")
        name = f"skill-{random.randrange(SKILLS)}"
        timed(stats, "read", lambda: client.request("GET", f"/v1/skills/{name}"), client=me)
        timed(stats, "read", lambda: client.request("GET", f"/v1/skills/{name}/files/references/guide.md"), client=me)
        time.sleep(0.005)


def sse_result(data: bytes, want_id: int):
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith("data:"):
            try:
                message = json.loads(line[5:])
            except ValueError:
                continue
            if message.get("id") == want_id:
                return message
    return None


def mcp(port: int, tenant: str, stats: Stats, deadline: float) -> None:
    client = Client(port, TOKENS[tenant])
    me = f"mcp {tenant}"
    stats.register(me)
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    while time.time() < deadline:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}}
        got = timed(stats, "mcp", lambda: client.request("POST", "/mcp", json.dumps(init), accept), (200,))
        if not got or not got[1].get("mcp-session-id"):
            stats.error("mcp", "no session")
            time.sleep(0.5)
            continue
        session = {**accept, "mcp-session-id": got[1]["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        timed(stats, "mcp", lambda: client.request("POST", "/mcp", json.dumps(note), session), (202,))
        for n in range(50):
            if time.time() >= deadline:
                break
            name = f"skill-{random.randrange(SKILLS)}"
            calls = [
                ("skills/list", {}),
                ("tools/call", {"name": "read_skill_file", "arguments": {"name": name, "path": "references/guide.md"}}),
                ("resources/read", {"uri": f"skill://{name}/SKILL.md"}),
            ]
            method, params = calls[n % len(calls)]
            body = json.dumps({"jsonrpc": "2.0", "id": n + 2, "method": method, "params": params})
            got = timed(stats, "mcp", lambda: client.request("POST", "/mcp", body, session), (200,))
            if got:
                message = sse_result(got[2], n + 2)
                if message is None or "error" in message or message.get("result", {}).get("isError"):
                    stats.error("mcp", f"{method}: {str(message)[:200]}")
                else:
                    # Only an answered call counts towards the client's floor.
                    with stats.lock:
                        stats.clients[me] += 1
            time.sleep(0.005)
        timed(stats, "mcp", lambda: client.request("DELETE", "/mcp", None, session), (200, 202, 204))


def writes(port: int, stats: Stats, deadline: float) -> None:
    client = Client(port, TOKENS["acme"])
    me = "write acme"
    stats.register(me)
    path = "/v1/skills/skill-0/files/references/notes.md"
    n = 0
    while time.time() < deadline:
        # The GET that finds the current ETag is a legitimate request too:
        # it is timed and counted, and its failure is an error, never the
        # end of the thread.
        current = timed(stats, "write", lambda: client.request("GET", path), (200, 404))
        if current is None:
            time.sleep(2)
            continue
        headers = {"Content-Type": "text/markdown"}
        if current[0] == 200:
            headers["If-Match"] = current[1]["ETag"]
        n += 1
        timed(stats, "write", lambda: client.request("PUT", path, f"# Notes {n}\n", headers), (200, 201), client=me)
        time.sleep(2)


def hostile_socket(port: int, deadline: float, stats: Stats, kind: str, opening: bytes, trickle: bytes) -> None:
    """One connection at a time: sends `opening`, then a byte of `trickle`
    a second, reconnecting when the server closes it."""
    while time.time() < deadline:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            stats.count(kind)
            s.sendall(opening)
            for byte in trickle:
                if time.time() >= deadline:
                    break
                time.sleep(1)
                s.sendall(bytes([byte]))
            else:
                while time.time() < deadline and s.recv(4096):
                    pass
            s.close()
        except OSError:
            time.sleep(0.2)


def session_flood(port: int, stats: Stats, deadline: float) -> None:
    client = Client(port, TOKENS["evil_read"])
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}})
    while time.time() < deadline:
        try:
            status, _, _ = client.request("POST", "/mcp", init, accept)
            stats.count(f"session flood {status}")
        except Exception:  # noqa: BLE001
            stats.count("session flood error")
        time.sleep(0.05)


def amplification(port: int, stats: Stats, deadline: float) -> None:
    client = Client(port, TOKENS["evil"])
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "amp", "version": "1"}}})
    while time.time() < deadline:
        try:
            _, headers, _ = client.request("POST", "/mcp", init, accept)
            session = {**accept, "mcp-session-id": headers.get("mcp-session-id", ""), "mcp-protocol-version": "2025-06-18"}
            for i in range(20):
                if time.time() >= deadline:
                    break
                client.request("GET", f"/v1/skills/loop-{i % 4}")
                client.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": i + 2, "method": "skills/list"}), session)
                client.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                    "params": {"name": "read_skill_file", "arguments": {"name": "big", "path": "data.bin"}}}), session)
                stats.count("amplification round")
            client.request("DELETE", "/mcp", None, session)
        except Exception:  # noqa: BLE001
            stats.count("amplification error")
            time.sleep(0.2)


def refresh_storm(port: int, stats: Stats, deadline: float) -> None:
    def one():
        try:
            Client(port, TOKENS["evil"]).request("POST", "/v1/refresh")
            stats.count("refresh")
        except Exception:  # noqa: BLE001
            stats.count("refresh error")

    while time.time() < deadline:
        threads = [threading.Thread(target=one) for _ in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(1)


def floors(duration: float) -> dict[str, int]:
    """The fewest successful requests each legitimate client must make in
    `duration` seconds: far below what a healthy run does (a reader makes
    hundreds a second, the writer one PUT every 2 s, an MCP client dozens
    a second), so a slow machine passes, but a client that stopped, never
    started or only failed does not."""
    return {
        "read acme": int(20 * duration),
        "read globex": int(20 * duration),
        "mcp acme": int(5 * duration),
        "mcp globex": int(5 * duration),
        "write acme": max(1, int(duration / 5)),
    }


HOSTILE_KINDS = ["slow headers", "idle", "anonymous slow body", "authenticated slow body",
                 "amplification round", "refresh"]


def guarded(stats: Stats, name: str, target, args) -> None:
    """Runs one client; an exception that ends it is recorded, never lost."""
    try:
        target(*args)
    except BaseException as e:  # noqa: BLE001 - any end but the deadline is a failure
        stats.death(name, repr(e))
        raise


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def gauges(port: int) -> dict[str, float]:
    try:
        _, _, data = Client(port, TOKENS["metrics"]).request("GET", "/metrics")
    except Exception:  # noqa: BLE001
        return {}
    out = {}
    for line in data.decode().splitlines():
        for name in ["skillstore_http_connections_open", "skillstore_mcp_sessions_open",
                     "skillstore_mcp_sessions_refused_total", "skillstore_mcp_sessions_expired_total"]:
            if line.startswith(name + " "):
                out[name] = float(line.split()[1])
    return out


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60)
    parser.add_argument("--binary", type=Path)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    binary = args.binary
    if binary is None:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "skillstore-cli", "--bin", "skillstore"],
                       cwd=REPO, check=True)
        binary = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "release" / "skillstore"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_tree(root)
        env = {**os.environ, "SOAK_ACME": TOKENS["acme"], "SOAK_GLOBEX": TOKENS["globex"],
               "SOAK_EVIL": TOKENS["evil"], "SOAK_EVIL_READ": TOKENS["evil_read"], "SOAK_METRICS": TOKENS["metrics"]}
        env.pop("RUST_LOG", None)
        log = open(root / "server.log", "w+")
        server = subprocess.Popen([str(binary), "serve", "--listen", "127.0.0.1:0", "--tenants", str(root / "server.yaml")],
                                  env=env, stderr=log, stdout=subprocess.DEVNULL)
        try:
            port = None
            for _ in range(500):
                log.seek(0)
                text = log.read()
                if "on http://" in text:
                    port = int(text.split("on http://")[1].split()[0].rsplit(":", 1)[1])
                    break
                time.sleep(0.02)
            assert port, "the server did not start"
            for _ in range(500):
                try:
                    if Client(port, "").request("GET", "/readyz")[0] == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.02)
            return run(port, server.pid, args)
        finally:
            server.terminate()
            server.wait(timeout=30)


def run(port: int, pid: int, args) -> int:
    stats = Stats()
    started = time.time()
    deadline = started + args.duration
    jobs = []
    for tenant in ["acme", "globex"]:
        jobs.append((reads, (port, tenant, stats, deadline)))
        jobs.append((mcp, (port, tenant, stats, deadline)))
    jobs.append((writes, (port, stats, deadline)))
    slow_head = b"GET /v1/skills HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4000 + b"\r\n\r\n"
    for _ in range(32):
        jobs.append((hostile_socket, (port, deadline, stats, "slow headers", b"G", slow_head[1:])))
        jobs.append((hostile_socket, (port, deadline, stats, "idle", b"", b"")))
    anonymous = b"PUT /v1/skills/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/markdown\r\nContent-Length: 1048576\r\n\r\n"
    for _ in range(16):
        jobs.append((hostile_socket, (port, deadline, stats, "anonymous slow body", anonymous, b"x" * 600)))
    authed = (b"PUT /v1/skills/loop-0/files/notes.md HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/markdown\r\n"
              b"Authorization: Bearer " + TOKENS["evil"].encode() + b"\r\nContent-Length: 1048576\r\n\r\n")
    for _ in range(4):
        jobs.append((hostile_socket, (port, deadline, stats, "authenticated slow body", authed, b"x" * 600)))
    jobs.append((session_flood, (port, stats, deadline)))
    jobs.append((amplification, (port, stats, deadline)))
    jobs.append((refresh_storm, (port, stats, deadline)))
    threads = []
    for i, (f, a) in enumerate(jobs):
        name = f"{f.__name__}-{i}"
        threads.append(threading.Thread(target=guarded, args=(stats, name, f, a), name=name, daemon=True))
    for t in threads:
        t.start()
    samples = []
    while time.time() < deadline:
        time.sleep(min(5, max(0.1, deadline - time.time())))
        samples.append({"t": round(time.time() - started), "rss_mib": round(rss_kib(pid) / 1024, 1), **gauges(port)})
        print(json.dumps(samples[-1]), flush=True)
    join_by = time.time() + 40
    for t in threads:
        t.join(timeout=max(0.0, join_by - time.time()))
    hung = [t.name for t in threads if t.is_alive()]
    report = {"duration_s": args.duration, "legitimate": {}, "hostile": stats.hostile, "samples": samples}
    errors = 0
    for kind in sorted(set(stats.latency) | set(stats.errors)):
        values = stats.latency.get(kind, [])
        failed = stats.errors.get(kind, [])
        errors += len(failed)
        report["legitimate"][kind] = {
            "requests": len(values) + len(failed),
            "errors": len(failed),
            "p50_ms": round(statistics.median(values) * 1000, 2) if values else None,
            "p99_ms": round(percentile(values, 0.99) * 1000, 2) if values else None,
            "first_errors": failed[:5],
        }
    every = [v for kind in stats.latency.values() for v in kind]
    report["legitimate_all"] = {
        "requests": len(every), "errors": errors,
        "p50_ms": round(statistics.median(every) * 1000, 2) if every else None,
        "p99_ms": round(percentile(every, 0.99) * 1000, 2) if every else None,
    }
    after_first_minute = [s["rss_mib"] for s in samples if s["t"] >= 60] or [s["rss_mib"] for s in samples]
    report["rss_mib"] = {"max": max(s["rss_mib"] for s in samples), "after_first_minute_min": min(after_first_minute),
                         "after_first_minute_max": max(after_first_minute)}
    report["connections_open_max"] = max(s.get("skillstore_http_connections_open", 0) for s in samples)
    print(json.dumps({k: v for k, v in report.items() if k != "samples"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    report["clients"] = dict(stats.clients)
    report["floors"] = floors(args.duration)
    report["died"] = stats.died
    report["hung"] = hung
    problems = []
    if errors:
        problems.append(f"{errors} legitimate request(s) failed")
    for name, what in sorted(stats.died.items()):
        problems.append(f"client thread {name} died: {what}")
    for name in hung:
        problems.append(f"client thread {name} still running 40 s after the deadline")
    for client, floor in floors(args.duration).items():
        made = stats.clients.get(client)
        if made is None:
            problems.append(f"legitimate client {client} never ran")
        elif made < floor:
            problems.append(f"legitimate client {client} made {made} successful request(s), fewer than {floor}")
    for kind in HOSTILE_KINDS:
        if not stats.hostile.get(kind):
            problems.append(f"hostile client kind {kind!r} never ran")
    print(json.dumps({"clients": report["clients"], "floors": report["floors"], "died": stats.died, "hung": hung},
                     indent=1))
    if problems:
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1
    print("every client above its floor, none died")
    print(f"{len(every)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
