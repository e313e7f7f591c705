"""BM25 baselines for the search evaluation, with rank_bm25 (BM25Okapi at
its defaults: k1 1.5, b 0.75) and no tuning: text lowercased and split on
anything that is not a letter or digit, no stopwords, no stemming.

Usage: search_eval_bm25.py --corpus DIR --fields desc|body
  desc: a skill's name and description; body: name, description and the
  SKILL.md body after the frontmatter.
Reads queries as JSON lines {"id", "query"} on stdin and writes one JSON
line {"id", "results"} per query: up to 10 corpus_paths, best first.
"""

import argparse
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_eval_corpus as sc  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--fields", choices=["desc", "body"], required=True)
    ap.add_argument("--limit", type=int, default=10)
    args = ap.parse_args()

    import numpy as np
    from rank_bm25 import BM25Okapi

    skills = sc.load_skills(sc.corpus_dir(args.corpus))
    ids = list(skills)
    docs = []
    for sid in ids:
        s = skills[sid]
        text = s["name"] + " " + s["description"]
        if args.fields == "body":
            text += " " + s["body"]
        docs.append(sc.tokens(text))
    bm25 = BM25Okapi(docs)
    out = []
    for q in sc.read_jsonl(sys.stdin):
        scores = bm25.get_scores(sc.tokens(q["query"]))
        # Stable sort: equal scores keep manifest order.
        order = np.argsort(-scores, kind="stable")[: args.limit]
        out.append({"id": q["id"], "results": [ids[i] for i in order if scores[i] > 0]})
    sc.write_jsonl(out)


if __name__ == "__main__":
    main()
