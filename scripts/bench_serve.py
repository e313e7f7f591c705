#!/usr/bin/env python3
"""Benchmark `skillstore serve` with wrk, side by side with nginx serving
the same SKILL.md files as static files, on loopback.

Usage: python3 scripts/bench_serve.py [--tree ROOT | --per-layer 250] [--duration 10] [--binary PATH]

ROOT is a layered tree from the peer harness's gen_fixture.py
(ROOT/{base,user,project,team}); without it a tree is generated.

Needs `wrk` and `nginx` (Debian packages) and builds the release binary
(or measures the one `--binary` names).
Measures, one after the other in one run:
- GET /v1/skills/{name} (64 connections, names in turn) against nginx
  serving each skill's SKILL.md: requests/s and p99;
- GET /v1/skills with If-None-Match (nothing changed: 304) against nginx's
  static rate;
- MCP tools/call read_skill_file (each SKILL.md in turn) over streamable HTTP (stateless
  2026-07-28 requests) on 16 connections: requests/s and p99;
- resident memory of one server holding 10 tenants x 1,000 skills.
"""

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAYERS = ["base", "user", "project", "team"]


def generate(root: Path, per_layer: int) -> list[str]:
    """Four layers of `per_layer` skills each; the first quarter of each
    layer's names are in every layer (a later layer's skill wins). Returns
    the names of the merged catalog."""
    names = set()
    for layer in LAYERS:
        for i in range(per_layer):
            name = f"skill-{i}" if i < per_layer // 4 else f"{layer}-{i}"
            names.add(name)
            skill = root / layer / name
            (skill / "references").mkdir(parents=True, exist_ok=True)
            body = "\n".join(f"Step {n}: do the thing carefully, then check it." for n in range(12))
            (skill / "SKILL.md").write_text(
                f"---\nname: {name}\ndescription: Use {name} when the task needs it; layer {layer}.\n"
                f"license: Apache-2.0\nmetadata:\n  owner: {layer}\n---\n# {name}\n\n{body}\n"
            )
            (skill / "references" / "guide.md").write_text(f"# Guide for {name}\n")
    (root / "skillstore.yaml").write_text(
        "sources:\n" + "".join(f"  - path: /{layer}\n" for layer in LAYERS)
    )
    return sorted(names)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(base: str) -> None:
    for _ in range(3000):
        try:
            with urllib.request.urlopen(f"{base}/readyz") as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.01)
    raise SystemExit("the server never became ready")


def wrk(url: str, connections: int, duration: int, script: Path | None = None, headers=()) -> tuple[float, str]:
    cmd = ["wrk", "-t2", f"-c{connections}", f"-d{duration}s", "--latency"]
    for h in headers:
        cmd += ["-H", h]
    if script:
        cmd += ["-s", str(script)]
    out = subprocess.run(cmd + [url], check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"\s99%\s+(\S+)", out).group(1)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        raise SystemExit(f"{url}: {non2xx.group(1)} failed responses\n{out}")
    return rps, p99


def rotate_script(path: Path, prefix: str, names: list[str], suffix: str) -> Path:
    listing = ",".join(f'"{n}"' for n in names)
    path.write_text(
        f"local names = {{{listing}}}\nlocal i = 0\n"
        "request = function()\n  i = i % #names + 1\n"
        f'  return wrk.format("GET", "{prefix}" .. names[i] .. "{suffix}")\nend\n'
    )
    return path


def nginx(root: Path, work: Path, port: int) -> subprocess.Popen:
    conf = work / "nginx.conf"
    conf.write_text(
        f"worker_processes auto;\npid {work}/nginx.pid;\nerror_log {work}/nginx-error.log;\n"
        "events { worker_connections 1024; }\n"
        "http {\n  access_log off;\n  sendfile on;\n  etag on;\n"
        f"  client_body_temp_path {work}/body; proxy_temp_path {work}/proxy; fastcgi_temp_path {work}/fcgi;\n"
        f"  uwsgi_temp_path {work}/uwsgi; scgi_temp_path {work}/scgi;\n"
        f"  server {{ listen 127.0.0.1:{port}; root {root}; }}\n}}\n"
    )
    return subprocess.Popen(["nginx", "-c", str(conf), "-g", "daemon off;"])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-layer", type=int, default=250)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--tree", type=Path, help="a layered tree (ROOT/{base,user,project,team})")
    ap.add_argument("--binary", type=Path, help="a built command to measure (default: build the release binary)")
    args = ap.parse_args()
    if args.binary:
        binary = args.binary.resolve()
    else:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "skillstore-cli", "--bin", "skillstore"],
                       cwd=REPO, check=True)
        binary = REPO / "target" / "release" / "skillstore"
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    # nginx's workers run as an unprivileged user: they must be able to read the tree.
    work.chmod(0o755)
    try:
        if args.tree:
            tree = work / "tree"
            for layer in LAYERS:
                shutil.copytree(args.tree / layer, tree / layer, symlinks=True)
            (tree / "skillstore.yaml").write_text(
                "sources:\n" + "".join(f"  - path: /{layer}\n" for layer in LAYERS)
            )
        else:
            tree = work / "tree"
            generate(tree, args.per_layer)
        port, nginx_port = free_port(), free_port()
        base, static = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{nginx_port}"
        server = subprocess.Popen([str(binary), "serve", "--listen", f"127.0.0.1:{port}"], cwd=tree,
                                  stderr=subprocess.DEVNULL)
        web = nginx(tree, work, nginx_port)
        try:
            wait_ready(base)
            time.sleep(0.2)
            import json
            with urllib.request.urlopen(f"{base}/v1/skills") as r:
                skills = json.load(r)["skills"]
            names = [s["name"] for s in skills]
            # nginx serves each winner's own SKILL.md, by its virtual path.
            static_paths = [s["path"].lstrip("/") for s in skills]
            print(f"tree: {args.tree or f'{args.per_layer} per layer'}, {len(LAYERS)} layers, {len(names)} skills; "
                  f"wrk -t2, {args.duration}s each, loopback, server and client on the same cores")

            show = rotate_script(work / "show.lua", "/v1/skills/", names, "")
            files = rotate_script(work / "static.lua", "/", static_paths, "")
            wrk(f"{base}/", 64, 2, show)  # warm up
            s_rps, s_p99 = wrk(f"{base}/", 64, args.duration, show)
            n_rps, n_p99 = wrk(f"{static}/", 64, args.duration, files)
            print(f"GET /v1/skills/{{name}}, 64 connections: skillstore {s_rps:,.0f} req/s (p99 {s_p99}); "
                  f"nginx SKILL.md {n_rps:,.0f} req/s (p99 {n_p99}); ratio {s_rps / n_rps:.2f}")

            with urllib.request.urlopen(f"{base}/v1/skills") as r:
                etag = r.headers["etag"]
            c_rps, c_p99 = wrk(f"{base}/v1/skills", 64, args.duration, headers=[f"If-None-Match: {etag}"])
            print(f"GET /v1/skills with If-None-Match (304), 64 connections: {c_rps:,.0f} req/s (p99 {c_p99}); "
                  f"ratio to nginx static {c_rps / n_rps:.2f}")

            mcp = work / "mcp.lua"
            listing = ",".join(f'"{n}"' for n in names)
            mcp.write_text(
                f"local names = {{{listing}}}\nlocal i = 0\n"
                'wrk.method = "POST"\n'
                'wrk.headers["Content-Type"] = "application/json"\n'
                'wrk.headers["Accept"] = "application/json, text/event-stream"\n'
                'wrk.headers["MCP-Protocol-Version"] = "2026-07-28"\n'
                'wrk.headers["Mcp-Method"] = "tools/call"\n'
                'wrk.headers["Mcp-Name"] = "read_skill_file"\n'
                "request = function()\n  i = i % #names + 1\n"
                '  local body = \'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_skill_file",'
                '"arguments":{"name":"\' .. names[i] .. \'","path":"SKILL.md"},'
                '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
                '"io.modelcontextprotocol/clientCapabilities":{}}}}\'\n'
                '  return wrk.format(nil, "/mcp", nil, body)\nend\n'
            )
            # One request by hand first: the tool must answer with the file, not an error.
            probe = urllib.request.Request(
                f"{base}/mcp",
                data=(
                    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_skill_file",'
                    f'"arguments":{{"name":"{names[0]}","path":"SKILL.md"}},'
                    '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
                    '"io.modelcontextprotocol/clientCapabilities":{}}}}'
                ).encode(),
                headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                         "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                         "Mcp-Name": "read_skill_file"},
            )
            with urllib.request.urlopen(probe) as r:
                answer = r.read().decode()
            if '"isError":true' in answer.replace(" ", "") or f"name: {names[0]}" not in answer:
                raise SystemExit(f"read_skill_file did not answer with the file: {answer[:500]}")
            m_rps, m_p99 = wrk(f"{base}/mcp", 16, args.duration, mcp)
            print(f"MCP tools/call read_skill_file, 16 connections: {m_rps:,.0f} req/s (p99 {m_p99})")
            print(f"server RSS after the runs: {rss_mb(server.pid):.0f} MB")
        finally:
            server.terminate()
            server.wait()
            web.terminate()
            web.wait()

        # Memory: 10 tenants x 1,000 skills.
        big = work / "big"
        for i in range(1000):
            skill = big / "skills" / f"skill-{i}"
            skill.mkdir(parents=True)
            (skill / "SKILL.md").write_text(
                f"---\nname: skill-{i}\ndescription: Use skill-{i} when the task needs it.\n---\n# skill-{i}\n\nSteps.\n"
            )
        tenants = "tenants:\n" + "".join(
            f"  - name: t{t}\n    tokens:\n      - env: BENCH_TOKEN_{t}\n"
            f"    config:\n      sources:\n        - path: /skills\n" for t in range(10)
        )
        (big / "tenants.yaml").write_text(tenants)
        env = dict(os.environ, **{f"BENCH_TOKEN_{t}": f"token-{t}" for t in range(10)})
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([str(binary), "serve", "--listen", f"127.0.0.1:{port}", "--tenants", "tenants.yaml"],
                                  cwd=big, env=env, stderr=subprocess.DEVNULL)
        try:
            wait_ready(base)
            for t in range(10):
                request = urllib.request.Request(f"{base}/v1/skills", headers={"authorization": f"Bearer token-{t}"})
                with urllib.request.urlopen(request) as r:
                    r.read()
            print(f"10 tenants x 1,000 skills, each listed once: RSS {rss_mb(server.pid):.0f} MB")
        finally:
            server.terminate()
            server.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
