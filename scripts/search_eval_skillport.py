"""skillport's search as a ranker for the search evaluation: the skillport
packages from PyPI without embeddings (its default, embedding_provider
"none"), so its full-text index (LanceDB's tantivy BM25 over id, name,
description, tags and category) answers. Its index is built over the corpus
directory itself, which skillport reads as <repo-slug>/<skill>/SKILL.md and
names "<repo-slug>/<skill>"; the index and skillport's metadata go to a
temporary directory, the corpus is only read.

skillport 1.1.0 cannot build its index over this corpus as it is: it
stores each frontmatter as JSON metadata, and 67 frontmatters hold unquoted
YAML dates, so the build stops with "Object of type date is not JSON
serializable". With --date-fix (the default) that one json.dumps call
writes dates as ISO strings; the metadata column is not among the fields it
searches, so ranking is unchanged. --no-date-fix shows the failure.

Queries go through search_skills, the function behind its MCP tool of that
name, with the configuration's defaults (search_threshold 0.2 included).

Its full-text search hands the query to tantivy's query parser, which
refuses some plain text (an apostrophe: "customer's"); skillport then falls
back to a substring match of the whole query, which finds nothing. That is
what its search does, and what the ranker reports by default. With --words
each query is first reduced to its words (split on anything that is not a
letter or digit, as the BM25 baselines tokenize), which shows the ranking
its index gives when the parser accepts every query.

With --timings each row also holds the seconds its search_skills call
took (scripts/search_latency.py reads them).

Usage: search_eval_skillport.py --corpus DIR [--words] [--timings]  (JSON lines in and
out, as search_eval_bm25.py)
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_eval_corpus as sc  # noqa: E402

# What skillport-mcp 1.1.0 needs, pinned as its lock file pins lancedb
# (0.26.0; later releases dropped the tantivy full-text index it builds).
REQUIREMENTS = [
    "skillport-mcp==1.1.0",
    "skillport-core==1.1.0",
    "lancedb==0.26.0",
    "pylance==1.0.0",
    "tantivy==0.25.1",
    "pyyaml==6.0.3",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--no-date-fix", dest="date_fix", action="store_false")
    ap.add_argument("--words", action="store_true", help="reduce each query to its words")
    ap.add_argument("--timings", action="store_true", help="add each query's seconds to its row")
    args = ap.parse_args()
    corpus = sc.corpus_dir(args.corpus).resolve()

    with tempfile.TemporaryDirectory(prefix="skillport-eval-") as tmp:
        # skillport's Config also reads SKILLPORT_* variables and a .env in
        # the working directory: run from an empty one, with none set.
        for key in [k for k in os.environ if k.startswith("SKILLPORT_")]:
            del os.environ[key]
        os.chdir(tmp)
        from skillport.modules.indexing.public.index import build_index
        from skillport.modules.skills import search_skills
        from skillport.shared.config import Config

        if args.date_fix:
            import json
            import types

            import skillport.modules.indexing.internal.lancedb as store

            store.json = types.SimpleNamespace(
                dumps=lambda obj, **kw: json.dumps(obj, default=str, **kw), loads=json.loads
            )

        config = Config(
            skills_dir=corpus,
            db_path=Path(tmp) / "index" / "skills.lancedb",
            meta_dir=Path(tmp) / "meta",
            embedding_provider="none",
        )
        with open(os.devnull, "w") as devnull:
            saved, sys.stdout = sys.stdout, devnull  # keep our stdout for results
            try:
                built = build_index(config=config, force=True)
            finally:
                sys.stdout = saved
        if not built.success:
            sys.exit(f"skillport index build failed: {built.message}")
        print(f"skillport indexed {built.skill_count} skills", file=sys.stderr)
        out = []
        for q in sc.read_jsonl(sys.stdin):
            text = " ".join(sc.tokens(q["query"])) if args.words else q["query"]
            started = time.perf_counter()
            found = search_skills(text, limit=args.limit, config=config)
            seconds = time.perf_counter() - started
            row = {"id": q["id"], "results": [s.id + "/SKILL.md" for s in found.skills]}
            if args.timings:
                row["seconds"] = seconds
            out.append(row)
        sc.write_jsonl(out)


if __name__ == "__main__":
    main()
