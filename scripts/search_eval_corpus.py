"""Shared pieces of the search evaluation: the corpus manifest, SKILL.md
parsing, the query file, and the word rule the queries are held to.

Used by search_eval_check.py (the query checker), search_eval.py (the
runner) and the rankers it starts (search_eval_bm25.py,
search_eval_skillport.py, search_eval_skillstore.py).
"""

from __future__ import annotations

import csv
import json
import os
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
QUERIES = REPO_ROOT / "eval" / "search" / "queries.tsv"
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "corpus" / "search"

# Common English function words and the filler words every skill
# description uses ("use when ...", "skill", "help"); they carry no topic.
STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be
    because been before being below between both but by can could did do
    does doing down during each else etc even ever every few for from further
    get gets got had has have having he her here hers herself him himself his
    how i if in into is it its itself just let lets like may me might more
    most much must my myself need needs no nor not now of off on once one only
    or other our ours ourselves out over own per please same shall she should
    so some such than that the their theirs them themselves then there these
    they this those through to too under until up upon us very via was we
    were what when where which while who whom why will with within without
    would yet you your yours yourself yourselves want wants use used using
    uses skill skills help helps make makes way something thing things want
    i'm im ive don't dont can't cant
    """.split()
)


def tokens(text: str) -> list[str]:
    """Lowercase, split on anything that is not a letter or digit."""
    return [t for t in re.split(r"[^a-z0-9]+", text.lower()) if t]


def stem(word: str) -> str:
    """A small suffix stripper: plurals, -ing, -ed, -ly, -ation and a few
    more, so that "charts"/"charting"/"charted" meet. Deliberately eager:
    a stem shared by mistake only makes the word rule stricter."""
    w = word
    for suffix, repl in (
        ("ational", "ate"),
        ("ization", "ize"),
        ("isation", "ize"),
        ("ations", "ate"),
        ("ation", "ate"),
        ("ities", ""),
        ("ity", ""),
        ("ments", ""),
        ("ment", ""),
        ("ness", ""),
        ("ings", ""),
        ("ing", ""),
        ("ied", "y"),
        ("ies", "y"),
        ("sses", "ss"),
        ("ed", ""),
        ("ers", ""),
        ("er", ""),
        ("ly", ""),
        ("es", ""),
        ("s", ""),
    ):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            if suffix == "s" and w.endswith("ss"):
                continue
            w = w[: -len(suffix)] + repl
            break
    if w.endswith("e") and len(w) > 4 and w[-2].isalpha():
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1].isalpha() and w[-1] not in "aeiouls":
        w = w[:-1]
    return w


def content_words(text: str) -> set[str]:
    """Stems of the words of `text` that are not stopwords."""
    return {stem(t) for t in tokens(text) if t not in STOPWORDS and len(t) > 1}


def corpus_dir(arg: str | None) -> Path:
    """The corpus directory from the command line, or the default beside the
    repository; exits with a clear message when it holds no MANIFEST.tsv."""
    path = Path(arg) if arg else DEFAULT_CORPUS
    if not (path / "MANIFEST.tsv").is_file():
        sys.exit(
            f"search eval: no corpus at {path} (expected MANIFEST.tsv there); "
            "pass the corpus directory with --corpus"
        )
    return path


def manifest(corpus: Path) -> list[dict[str, str]]:
    """The manifest's rows, one per skill, in file order."""
    with open(corpus / "MANIFEST.tsv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def split_skill_md(text: str) -> tuple[str, str]:
    """(frontmatter YAML, body) of a SKILL.md; no frontmatter gives ("", text)."""
    m = re.match(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", text, re.S)
    if not m:
        return "", text
    return m.group(1), m.group(2)


def parse_skill_md(text: str) -> dict[str, str]:
    """name, description and body of a SKILL.md."""
    import yaml  # the evaluation's virtual environment pins it

    front, body = split_skill_md(text)
    try:
        meta = yaml.safe_load(front) if front else {}
    except yaml.YAMLError:
        meta = {}
    if not isinstance(meta, dict):
        meta = {}
    return {
        "name": str(meta.get("name") or ""),
        "description": str(meta.get("description") or ""),
        "body": body,
    }


def load_skills(corpus: Path) -> dict[str, dict[str, str]]:
    """Every skill of the corpus by corpus_path: manifest fields plus name,
    description and body read from its SKILL.md."""
    skills = {}
    for row in manifest(corpus):
        text = (corpus / row["corpus_path"]).read_text(encoding="utf-8")
        parsed = parse_skill_md(text)
        skills[row["corpus_path"]] = {**row, **parsed, "name": parsed["name"] or row["name"]}
    return skills


def load_queries(path: Path = QUERIES) -> list[dict]:
    """The query set: id, query, relevant (intended skill first), note."""
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            out.append(
                {
                    "id": row["id"],
                    "query": row["query"],
                    "relevant": [r.strip() for r in row["relevant"].split(",") if r.strip()],
                    "note": row.get("note") or "",
                }
            )
    return out


def write_jsonl(rows, stream=sys.stdout) -> None:
    for row in rows:
        stream.write(json.dumps(row) + "\n")
    stream.flush()


def read_jsonl(stream) -> list[dict]:
    return [json.loads(line) for line in stream if line.strip()]


def ensure_venv(name: str, requirements: list[str]) -> Path:
    """target/venvs/NAME with exactly these pinned requirements, made once and
    reused while they are unchanged (as scripts/test.sh does); returns its
    python."""
    import subprocess

    venv = REPO_ROOT / "target" / "venvs" / name
    stamp = venv / ".stamp"
    want = " ".join(requirements)
    if not stamp.is_file() or stamp.read_text().strip() != want:
        if venv.exists():
            import shutil

            shutil.rmtree(venv)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", *requirements],
            check=True,
        )
        stamp.write_text(want + "\n")
    return venv / "bin" / "python"


def reexec_in(python: Path) -> None:
    """Run this script again under `python` unless it already is."""
    if Path(sys.prefix).resolve() != python.parent.parent.resolve():
        os.execv(str(python), [str(python), *sys.argv])


# The evaluation's own environment: YAML for frontmatter, rank_bm25 for the
# BM25 baselines (numpy is its only dependency, pinned too).
EVAL_VENV = "search-eval"
EVAL_REQUIREMENTS = ["pyyaml==6.0.3", "rank-bm25==0.2.2", "numpy==2.2.6"]
