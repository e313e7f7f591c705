"""skillstore's own search as a ranker for the search evaluation.

The corpus is laid out <repo-slug>/<dir>/SKILL.md, and in 95 skills the
directory differs from the frontmatter name. The catalog keys skills by
frontmatter name (a later source shadows an earlier one of the same name;
a directory that differs from its name is a `name_mismatch` warning).
Names are unique across the corpus, so nothing would be shadowed either
way; to give the catalog a specification-valid tree with no warnings, the
ranker copies every SKILL.md once into a temporary tree NAME/SKILL.md,
served as one source, and maps each result back to its corpus_path by name
(the manifest's names are unique; a repeated one is an error here). The
corpus is only read.

Each query runs `skillstore --mount /=TREE --source /skills/ search QUERY
--limit 10 --json` and reads {"results": [{"name", ...}]} from it, best
first. With --batch CMD, CMD (split on spaces, given the same --mount and
--source) is run once instead, with the queries as JSON lines {"id",
"query"} on standard input, and must print one JSON line {"id", "results":
[{"name", ...}]} per query.

Usage: search_eval_skillstore.py --corpus DIR [--skillstore BIN] [--batch CMD]
(JSON lines in and out, as search_eval_bm25.py)
"""

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_eval_corpus as sc  # noqa: E402


def build_tree(corpus: Path, root: Path) -> dict[str, str]:
    """Copies each SKILL.md to root/skills/NAME/SKILL.md; returns name -> corpus_path."""
    rows = sc.manifest(corpus)
    counts = collections.Counter(r["name"] for r in rows)
    repeated = sorted(n for n, c in counts.items() if c > 1)
    if repeated:
        sys.exit(f"skill names repeat in the manifest, results could not be told apart: {repeated}")
    by_name = {}
    for row in rows:
        dest = root / "skills" / row["name"]
        dest.mkdir(parents=True)
        shutil.copyfile(corpus / row["corpus_path"], dest / "SKILL.md")
        by_name[row["name"]] = row["corpus_path"]
    return by_name


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--skillstore", default=str(sc.REPO_ROOT / "target" / "release" / "skillstore"))
    ap.add_argument("--batch", help="a batch search command (see the module doc)")
    ap.add_argument("--limit", type=int, default=10)
    args = ap.parse_args()
    corpus = sc.corpus_dir(args.corpus).resolve()
    queries = sc.read_jsonl(sys.stdin)

    with tempfile.TemporaryDirectory(prefix="skillstore-eval-") as tmp:
        root = Path(tmp)
        by_name = build_tree(corpus, root)
        layer = ["--mount", f"/={root}", "--source", "/skills/"]

        def names(results):
            return [by_name.get(r["name"], "?" + r["name"]) for r in results]

        out = []
        if args.batch:
            cmd = args.batch.split() + layer
            feed = "".join(json.dumps({"id": q["id"], "query": q["query"]}) + "\n" for q in queries)
            done = subprocess.run(cmd, input=feed, capture_output=True, text=True, cwd=tmp, check=False)
            if done.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
            for row in sc.read_jsonl(done.stdout.splitlines()):
                out.append({"id": row["id"], "results": names(row["results"])[: args.limit]})
        else:
            for q in queries:
                cmd = [args.skillstore, *layer, "search", q["query"], "--limit", str(args.limit), "--json"]
                done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, check=False)
                if done.returncode != 0:
                    sys.exit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
                out.append({"id": q["id"], "results": names(json.loads(done.stdout)["results"])})
        sc.write_jsonl(out)


if __name__ == "__main__":
    main()
