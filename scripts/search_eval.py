"""Runs the search evaluation: each ranker answers every query of
eval/search/queries.tsv over the corpus, and a markdown table gives
recall@1, recall@5 and MRR@10 for each.

A query counts as found at rank k when any skill it lists as relevant (the
intended one or an equally good one) is among the first k results; MRR@10
averages 1/rank of the first relevant result, 0 when none is in the top 10.

Rankers (--ranker, repeatable; default all):
  bm25-desc        BM25 over name and description (rank_bm25, no tuning)
  bm25-body        BM25 over name, description and SKILL.md body
  skillport        skillport's search from PyPI, without embeddings
  skillport-words  the same with each query reduced to its words (its
                   query parser refuses some text, e.g. an apostrophe)
  skillstore       `skillstore search --json` (--skillstore BIN, or
                   --skillstore-batch CMD for a batch mode)
and any command (--cmd LABEL=COMMAND, repeatable) that reads JSON lines
{"id", "query"} on standard input and prints one JSON line {"id",
"results": [corpus_path, ...]} per query, best first; the corpus directory
is appended to it as `--corpus DIR`.

Usage: python3 scripts/search_eval.py [--corpus DIR] [--ranker NAME]...
       [--cmd LABEL=COMMAND]... [--details FILE]
The corpus is read where it is (default ../shared/corpus/search beside the
repository); virtual environments go to target/venvs/.
"""

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_eval_corpus as sc  # noqa: E402

SCRIPTS = Path(__file__).resolve().parent
BUILTIN = ["bm25-desc", "bm25-body", "skillport", "skillport-words", "skillstore"]
LABELS = {
    "bm25-desc": "BM25, name + description",
    "bm25-body": "BM25, name + description + body",
    "skillport": "skillport 1.1.0 (no embeddings)",
    "skillport-words": "skillport 1.1.0, query reduced to words",
    "skillstore": "skillstore search",
}


def ranker_command(name: str, args) -> list[str] | str:
    """The command for a built-in ranker, or a string saying why it cannot run."""
    if name in ("bm25-desc", "bm25-body"):
        py = sc.ensure_venv(sc.EVAL_VENV, sc.EVAL_REQUIREMENTS)
        return [str(py), str(SCRIPTS / "search_eval_bm25.py"), "--fields", name.split("-")[1]]
    if name in ("skillport", "skillport-words"):
        sys.path.insert(0, str(SCRIPTS))
        import search_eval_skillport

        py = sc.ensure_venv("skillport", search_eval_skillport.REQUIREMENTS)
        cmd = [str(py), str(SCRIPTS / "search_eval_skillport.py")]
        return cmd + ["--words"] if name == "skillport-words" else cmd
    if name == "skillstore":
        cmd = [sys.executable, str(SCRIPTS / "search_eval_skillstore.py")]
        if args.skillstore_batch:
            return cmd + ["--batch", args.skillstore_batch]
        binary = Path(args.skillstore)
        if not binary.is_file():
            return f"no skillstore binary at {binary} (build it, or pass --skillstore)"
        probe = subprocess.run([str(binary), "search", "--help"], capture_output=True, text=True)
        if probe.returncode != 0:
            return f"{binary} has no search command"
        return cmd + ["--skillstore", str(binary)]
    raise SystemExit(f"unknown ranker {name}; built-in: {', '.join(BUILTIN)}")


def score(queries, answers) -> dict:
    """recall@1, recall@5, MRR@10 and the rank of each query (None: not in the top 10)."""
    ranks = {}
    for q in queries:
        results = answers.get(q["id"], [])[:10]
        rank = next((i + 1 for i, r in enumerate(results) if r in q["relevant"]), None)
        ranks[q["id"]] = rank
    n = len(queries)
    return {
        "recall@1": sum(1 for r in ranks.values() if r == 1) / n,
        "recall@5": sum(1 for r in ranks.values() if r and r <= 5) / n,
        "mrr@10": sum(1 / r for r in ranks.values() if r) / n,
        "ranks": ranks,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", help="corpus directory (default: ../shared/corpus/search)")
    ap.add_argument("--queries", default=str(sc.QUERIES))
    ap.add_argument("--ranker", action="append", choices=BUILTIN)
    ap.add_argument("--cmd", action="append", default=[], metavar="LABEL=COMMAND")
    ap.add_argument("--skillstore", default=str(sc.REPO_ROOT / "target" / "release" / "skillstore"))
    ap.add_argument("--skillstore-batch", metavar="CMD")
    ap.add_argument("--details", help="write each query's rank under each ranker to this JSON file")
    args = ap.parse_args()

    corpus = sc.corpus_dir(args.corpus).resolve()
    queries = sc.load_queries(Path(args.queries))
    known = {r["corpus_path"] for r in sc.manifest(corpus)}
    missing = sorted({r for q in queries for r in q["relevant"]} - known)
    if missing:
        sys.exit(f"queries name skills the corpus lacks (run search_eval_check.py): {missing[:5]}")
    feed = "".join(json.dumps({"id": q["id"], "query": q["query"]}) + "\n" for q in queries)

    rankers = [(LABELS[n], ranker_command(n, args)) for n in (args.ranker or BUILTIN)]
    for spec in args.cmd:
        label, _, command = spec.partition("=")
        rankers.append((label, shlex.split(command)))

    rows, details = [], {}
    for label, cmd in rankers:
        if isinstance(cmd, str):
            rows.append(f"| {label} | – | – | – | not run: {cmd} |")
            continue
        print(f"== {label}: {' '.join(cmd)}", file=sys.stderr)
        start = time.monotonic()
        done = subprocess.run(
            cmd + ["--corpus", str(corpus)], input=feed, capture_output=True, text=True, check=False
        )
        took = time.monotonic() - start
        if done.returncode != 0:
            rows.append(f"| {label} | – | – | – | failed: {done.stderr.strip().splitlines()[-1:]} |")
            print(done.stderr, file=sys.stderr)
            continue
        answers = {a["id"]: a["results"] for a in sc.read_jsonl(done.stdout.splitlines())}
        m = score(queries, answers)
        details[label] = m["ranks"]
        rows.append(
            f"| {label} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | {m['mrr@10']:.3f} "
            f"| {len(queries)} queries, {took:.1f} s |"
        )

    print("| ranker | recall@1 | recall@5 | MRR@10 | run |")
    print("| --- | ---: | ---: | ---: | --- |")
    for row in rows:
        print(row)
    if args.details:
        Path(args.details).write_text(json.dumps(details, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
