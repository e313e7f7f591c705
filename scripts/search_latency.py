"""Query latency of search, side by side: skillstore through `serve`
(GET /v1/search over one keep-alive connection) and through `search
--batch` (one query written, its answer line read, then the next), and
skillport's search_skills called in its own process, on the same queries
(eval/search/queries.tsv) over the same corpus. With --tree, skillstore is
measured on a layered tree from gen_fixture.py too (ROOT/{base,user,
project,team}), which skillport does not read.

Every query is asked once to warm up, then --rounds times; the table gives
the median and the 99th percentile in milliseconds. The library's own
latency (no process boundary) is `cargo bench --bench search`.

Usage: python3 scripts/search_latency.py [--skillstore BIN] [--corpus DIR]
       [--tree ROOT] [--rounds N] [--no-skillport]
"""

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_eval_corpus as sc  # noqa: E402
import search_eval_skillstore  # noqa: E402

SCRIPTS = Path(__file__).resolve().parent
LAYERS = ["--source", "/base/", "--source", "/user/", "--source", "/project/", "--source", "/team/"]


def summary(seconds: list[float]) -> tuple[float, float]:
    """Median and 99th percentile, in milliseconds."""
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def through_serve(binary: str, layer: list[str], queries: list[str], rounds: int, cwd: str) -> list[float]:
    """Seconds per GET /v1/search, one connection kept alive."""
    log = tempfile.TemporaryFile("w+")
    server = subprocess.Popen([binary, *layer, "serve", "--listen", "127.0.0.1:0"], cwd=cwd,
                              stdout=subprocess.DEVNULL, stderr=log)
    try:
        port = None
        for _ in range(3000):
            log.seek(0)
            text = log.read()
            if "on http://" in text:
                port = int(text.split("on http://")[1].split()[0].rsplit(":", 1)[1])
                break
            if server.poll() is not None:
                sys.exit(f"serve exited: {text}")
            time.sleep(0.02)
        if port is None:
            sys.exit("serve did not say where it listens")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

        def ask(query: str) -> float:
            started = time.perf_counter()
            conn.request("GET", "/v1/search?" + urllib.parse.urlencode({"q": query, "limit": 10}))
            response = conn.getresponse()
            body = response.read()
            elapsed = time.perf_counter() - started
            if response.status != 200:
                sys.exit(f"/v1/search answered {response.status}: {body[:200]!r}")
            return elapsed

        for _ in range(600):
            try:
                conn.request("GET", "/readyz")
                response = conn.getresponse()
                response.read()
                if response.status == 200:
                    break
            except OSError:
                conn.close()
            time.sleep(0.05)
        for q in queries:
            ask(q)
        return [ask(q) for _ in range(rounds) for q in queries]
    finally:
        server.terminate()
        server.wait(timeout=60)


def through_batch(binary: str, layer: list[str], queries: list[str], rounds: int, cwd: str) -> list[float]:
    """Seconds from writing one query line to reading its answer line."""
    child = subprocess.Popen([binary, *layer, "search", "--batch", "--limit", "10"], cwd=cwd, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def ask(query: str) -> float:
        started = time.perf_counter()
        child.stdin.write(json.dumps({"query": query}) + "\n")
        child.stdin.flush()
        line = child.stdout.readline()
        elapsed = time.perf_counter() - started
        if "results" not in json.loads(line):
            sys.exit(f"search --batch answered {line.strip()}")
        return elapsed

    try:
        for q in queries:
            ask(q)
        return [ask(q) for _ in range(rounds) for q in queries]
    finally:
        child.stdin.close()
        child.wait(timeout=60)


def through_skillport(corpus: Path, queries: list[str], rounds: int) -> list[float]:
    """Seconds per search_skills call, from its own process."""
    import search_eval_skillport

    py = sc.ensure_venv("skillport", search_eval_skillport.REQUIREMENTS)
    rows = [{"id": i, "query": q} for i, q in enumerate(queries * (rounds + 1))]
    done = subprocess.run([str(py), str(SCRIPTS / "search_eval_skillport.py"), "--corpus", str(corpus), "--timings"],
                          input="".join(json.dumps(r) + "\n" for r in rows), capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"skillport failed: {done.stderr.strip()[-400:]}")
    seconds = [row["seconds"] for row in sc.read_jsonl(done.stdout.splitlines())]
    return seconds[len(queries):]  # the first round warms up


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skillstore", default=str(sc.REPO_ROOT / "target" / "release" / "skillstore"))
    ap.add_argument("--corpus", help="corpus directory (default: ../shared/corpus/search)")
    ap.add_argument("--tree", help="a gen_fixture.py tree, measured too")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-skillport", action="store_true")
    args = ap.parse_args()
    corpus = sc.corpus_dir(args.corpus).resolve()
    queries = [q["query"] for q in sc.load_queries()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="skillstore-latency-") as tmp:
        root = Path(tmp) / "tree"
        count = len(search_eval_skillstore.build_tree(corpus, root))
        layer = ["--mount", f"/={root}", "--source", "/skills/"]
        rows.append(("skillstore serve, GET /v1/search", "corpus", count,
                     summary(through_serve(args.skillstore, layer, queries, args.rounds, tmp))))
        rows.append(("skillstore search --batch", "corpus", count,
                     summary(through_batch(args.skillstore, layer, queries, args.rounds, tmp))))
        if not args.no_skillport:
            rows.append(("skillport search_skills (in process)", "corpus", count,
                         summary(through_skillport(corpus, queries, args.rounds))))
        if args.tree:
            tree = Path(args.tree).resolve()
            layered = ["--mount", f"/={tree}", *LAYERS]
            skills = json.loads((tree / "expected.json").read_text()).get("skills_after_overrides", "?")
            rows.append(("skillstore serve, GET /v1/search", tree.name, skills,
                         summary(through_serve(args.skillstore, layered, queries, args.rounds, tmp))))
            rows.append(("skillstore search --batch", tree.name, skills,
                         summary(through_batch(args.skillstore, layered, queries, args.rounds, tmp))))
    print(f"search latency: {len(queries)} queries x {args.rounds} rounds, milliseconds")
    print("| path | tree | skills | median | p99 |")
    print("| --- | --- | --- | --- | --- |")
    for path, tree, skills, (median, p99) in rows:
        print(f"| {path} | {tree} | {skills} | {median:.2f} | {p99:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
