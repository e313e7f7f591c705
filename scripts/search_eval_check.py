"""Checks the search evaluation's query set (eval/search/queries.tsv):

- every id in `relevant` is a corpus_path of the corpus's MANIFEST.tsv;
- each query shares at most two content words (stopwords dropped, after
  lowercasing and simple stemming) with the name and description of every
  skill it lists as relevant, so finding them takes more than word matching;
- query ids and query texts are unique, and there are at least 120 queries.

Usage: python3 scripts/search_eval_check.py [--corpus DIR] [--queries FILE] [-v]
Exits non-zero and lists every violation when the set breaks a rule.
"""

import argparse
import collections
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_eval_corpus as sc  # noqa: E402

MAX_SHARED = 2
MIN_QUERIES = 120


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", help="corpus directory (default: ../shared/corpus/search)")
    ap.add_argument("--queries", default=str(sc.QUERIES))
    ap.add_argument("-v", "--verbose", action="store_true", help="print shared words of every query")
    args = ap.parse_args()
    sc.reexec_in(sc.ensure_venv(sc.EVAL_VENV, sc.EVAL_REQUIREMENTS))

    corpus = sc.corpus_dir(args.corpus)
    skills = sc.load_skills(corpus)
    queries = sc.load_queries(Path(args.queries))
    errors = []
    seen_ids, seen_text = set(), set()
    per_repo = collections.Counter()
    shared_hist = collections.Counter()
    for q in queries:
        if q["id"] in seen_ids:
            errors.append(f"{q['id']}: duplicate id")
        seen_ids.add(q["id"])
        norm = " ".join(sc.tokens(q["query"]))
        if norm in seen_text:
            errors.append(f"{q['id']}: duplicate query text")
        seen_text.add(norm)
        if not q["relevant"]:
            errors.append(f"{q['id']}: no relevant skill")
        if len(set(q["relevant"])) != len(q["relevant"]):
            errors.append(f"{q['id']}: a relevant skill is listed twice")
        words = sc.content_words(q["query"])
        for i, rel in enumerate(q["relevant"]):
            skill = skills.get(rel)
            if skill is None:
                errors.append(f"{q['id']}: {rel} is not a corpus_path in MANIFEST.tsv")
                continue
            shared = words & sc.content_words(skill["name"] + " " + skill["description"])
            if i == 0:
                per_repo[skill["repo"]] += 1
                shared_hist[len(shared)] += 1
            if len(shared) > MAX_SHARED:
                errors.append(
                    f"{q['id']}: shares {len(shared)} content words with {rel}: {sorted(shared)}"
                )
            if args.verbose:
                print(f"{q['id']}\t{rel}\t{sorted(shared)}")
    if len(queries) < MIN_QUERIES:
        errors.append(f"only {len(queries)} queries, at least {MIN_QUERIES} wanted")

    print(f"{len(queries)} queries, intended skills from {len(per_repo)} repositories")
    for repo, n in per_repo.most_common():
        print(f"  {n:3d}  {repo}")
    print("content words shared with the intended skill: "
          + ", ".join(f"{k}: {v}" for k, v in sorted(shared_hist.items())))
    for e in errors:
        print("ERROR", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
