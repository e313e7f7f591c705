"""A deterministic layered skills tree: ROOT/{base,user,project,team}/NAME/SKILL.md
(+ references/), the same tree as a {virtual_path: content} dict, and the
skills a deepagents-compatible loader must produce."""
from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from pathlib import Path

LAYERS = ("base", "user", "project", "team")
MAX_NAME = 64

WORDS = (
    "api audit backup batch build cache canary chart check cloud code commit "
    "compose config cron csv data debug deploy diff docker docs email etl event "
    "excel export feed fetch file form format git graph grep helm image import "
    "index infra invoice json kafka lint load log mail map merge metric migrate "
    "mock model monitor note notebook oauth pdf plan plot policy pr profile "
    "prompt proto query queue rag redis refactor release report repo review "
    "rollout route rust schema scan search secret sheet shell slack slide sql "
    "sync table task terraform test ticket trace triage upload vault vector "
    "video web wiki yaml"
).split()
SUFFIXES = "helper tool kit runner guide assistant pipeline checker builder writer reader manager".split()

VOCAB = (
    "the a an this that skill agent user file files data request task output input "
    "report table query results summary steps step workflow guide script tool tools "
    "project repository branch commit review test tests build release deploy config "
    "values schema format document documents page pages form forms field fields "
    "error errors warning log logs metric metrics trace service services cluster "
    "should must can may will when before after with without using into from for "
    "to of in on by and or not only always never first then finally also each "
    "every all any some many few small large fast safe clear short long simple "
    "structured detailed concise correct consistent reproducible incremental "
    "extract convert validate generate analyse summarise compare merge split "
    "filter sort group count check fix update create delete read write open close "
    "run start stop retry wait collect upload download parse render export import"
).split()
UNICODE_WORDS = ["café", "naïve", "résumé", "façade", "Zürich", "→", "über", "日本語", "emoji✓", "coöperate"]
LICENSES = ["MIT", "Apache-2.0", "BSD-3-Clause", "Proprietary. LICENSE.txt has complete terms", "MPL-2.0"]
COMPAT = [
    "Requires Python 3.10+ and network access",
    "Designed for Claude Code; needs git and a POSIX shell",
    "Works with any agent that can run bash; needs jq",
    "Requires docker, kubectl >= 1.28 and read access to the cluster",
]
TOOLS = ["Bash", "Read", "Write", "Edit", "Grep", "Glob", "WebFetch", "read_file", "write_file", "ls", "execute"]
LANGS = ["python", "bash", "json", "yaml", "rust", "sql"]


def sentence(rng: random.Random, lo: int, hi: int, unicode_ok: bool = False) -> str:
    n = rng.randint(lo, hi)
    words = [rng.choice(VOCAB) for _ in range(n)]
    if unicode_ok and rng.random() < 0.5:
        words[rng.randrange(n)] = rng.choice(UNICODE_WORDS)
    s = " ".join(words)
    if rng.random() < 0.3 and n > 6:
        # a comma inside, never ": " or " #" (plain-scalar safe)
        k = rng.randint(2, n - 3)
        parts = s.split(" ")
        parts[k] = parts[k] + ","
        s = " ".join(parts)
    return s[0].upper() + s[1:] + "."


def make_description(rng: random.Random) -> str:
    target = rng.randint(100, 600)
    unicode_ok = rng.random() < 0.10
    parts: list[str] = []
    while len(" ".join(parts)) < target:
        parts.append(sentence(rng, 5, 16, unicode_ok))
    text = " ".join(parts)
    if len(text) > 600:
        text = text[:599].rstrip(" ,") + "."
    if len(text) < 100:  # cannot happen with the loop above, kept as a guard
        text = (text + " Use it when the task matches.")[:600]
    return text


def yaml_scalar_block(key: str, text: str, style: str) -> str:
    """Emit `key: text` in one of three YAML styles that parse back to exactly `text`."""
    if style == "plain":
        return f"{key}: {text}\n"
    if style == "quoted":
        esc = text.replace("\\", "\\\\").replace('"', '\\"')
        return f'{key}: "{esc}"\n'
    # folded block, stripped: lines joined by single spaces when parsed
    lines, cur = [], ""
    for w in text.split(" "):
        if cur and len(cur) + 1 + len(w) > 76:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur)
    return f"{key}: >-\n" + "".join(f"  {ln}\n" for ln in lines)


def make_body(rng: random.Random, name: str) -> str:
    target = rng.randint(2048, 8192)
    title = " ".join(p.capitalize() for p in name.split("-"))
    out = [f"# {title}\n\n", sentence(rng, 10, 25) + " " + sentence(rng, 10, 25) + "\n\n"]
    size = sum(len(x.encode()) for x in out)
    sec = 0
    while size < target:
        sec += 1
        kind = rng.random()
        chunk = [f"## {sentence(rng, 2, 5)[:-1]}\n\n"]
        if kind < 0.35:
            for _ in range(rng.randint(1, 3)):
                chunk.append(" ".join(sentence(rng, 8, 20) for _ in range(rng.randint(2, 5))) + "\n\n")
        elif kind < 0.60:
            for i in range(rng.randint(3, 8)):
                bullet = f"{i + 1}." if rng.random() < 0.5 else "-"
                chunk.append(f"{bullet} {sentence(rng, 4, 14)}\n")
            chunk.append("\n")
        elif kind < 0.80:
            lang = rng.choice(LANGS)
            chunk.append(f"```{lang}\n")
            for _ in range(rng.randint(3, 12)):
                chunk.append(f"{rng.choice(VOCAB)}_{rng.randint(0, 99)} = {rng.choice(VOCAB)}({rng.randint(0, 999)})  # {rng.choice(VOCAB)}\n")
            chunk.append("```\n\n")
        elif kind < 0.92:
            chunk.append("| step | tool | note |\n|---|---|---|\n")
            for i in range(rng.randint(2, 6)):
                chunk.append(f"| {i + 1} | {rng.choice(TOOLS)} | {sentence(rng, 3, 8)} |\n")
            chunk.append("\n")
        else:
            chunk.append(sentence(rng, 6, 12) + "\n\n---\n\n" + sentence(rng, 6, 12) + "\n\n")
        text = "".join(chunk)
        out.append(text)
        size += len(text.encode())
    body = "".join(out)
    raw = body.encode()
    if len(raw) > 8192:  # trim at a line boundary, keep >= 2048
        cut = raw[:8192].rfind(b"\n")
        body = raw[: max(cut, 2048)].decode("utf-8", "ignore").rstrip() + "\n"
    return body


def make_skill_md(rng: random.Random, name: str, layer: str) -> str:
    desc = make_description(rng)
    style = rng.choices(["plain", "quoted", "folded"], weights=[6, 2, 2])[0]
    fm = ["---\n", f"name: {name}\n", yaml_scalar_block("description", desc, style)]
    if rng.random() < 0.5:
        lic = rng.choice(LICENSES)
        fm.append(f"license: {lic}\n" if "." not in lic else f'license: "{lic}"\n')
    if rng.random() < 0.25:
        fm.append(f"compatibility: {rng.choice(COMPAT)}\n")
    if rng.random() < 0.40:
        fm.append("metadata:\n")
        fm.append(f"  author: {rng.choice(['platform-team', 'alice', 'bob', 'sre'])}\n")
        fm.append(f'  version: "{rng.randint(0, 3)}.{rng.randint(0, 20)}"\n')
        fm.append(f"  layer: {layer}\n")
    if rng.random() < 0.30:
        tools = rng.sample(TOOLS, rng.randint(1, 4))
        if rng.random() < 0.5:
            fm.append(f"allowed-tools: {' '.join(tools)}\n")
        else:
            fm.append("allowed-tools:\n" + "".join(f"  - {t}\n" for t in tools))
    fm.append("---\n\n")
    return "".join(fm) + make_body(rng, name)


def make_reference(rng: random.Random) -> str:
    target = rng.randint(512, 4096)
    parts = [f"# {sentence(rng, 2, 5)[:-1]}\n\n"]
    while sum(len(p) for p in parts) < target:
        parts.append(" ".join(sentence(rng, 8, 18) for _ in range(3)) + "\n\n")
    return "".join(parts)


class NameFactory:
    """Unique, spec-valid names; deterministic given the rng call sequence."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()
        self.counter = 0

    def _valid(self, n: str) -> bool:
        return (
            0 < len(n) <= MAX_NAME
            and not n.startswith("-")
            and not n.endswith("-")
            and "--" not in n
            and all(c == "-" or c.isdigit() or ("a" <= c <= "z") for c in n)
        )

    def new(self) -> str:
        rng = self.rng
        while True:
            self.counter += 1
            k = rng.choices([1, 2, 3, 4, 6], weights=[2, 5, 4, 2, 1])[0]
            parts = [rng.choice(WORDS) for _ in range(k)]
            if rng.random() < 0.5:
                parts.append(rng.choice(SUFFIXES))
            if rng.random() < 0.6 or k == 1:
                parts.append(str(self.counter))
            n = "-".join(parts)
            if rng.random() < 0.02:  # a few long names, exactly 64 chars
                n = (n + "-" + "-".join(rng.choice(WORDS) for _ in range(12)))[:MAX_NAME].rstrip("-")
            n = n[:MAX_NAME].rstrip("-")
            if self._valid(n) and n not in self.used:
                self.used.add(n)
                return n

    def extend(self, base: str) -> str | None:
        """A new name that has `base` as a strict prefix ("foo" -> "foo-kit")."""
        for suf in SUFFIXES:
            n = f"{base}-{suf}"
            if len(n) <= MAX_NAME and self._valid(n) and n not in self.used:
                self.used.add(n)
                return n
        return None


def plan_layers(per_layer: int, seed: int, share: float) -> dict[str, list[str]]:
    rng = random.Random(f"names:{seed}")
    names = NameFactory(rng)
    # Pool size so that, with each pooled name in a uniform 2..4-layer subset
    # (expected membership 3/4 of the layers), ~share of each layer is shared.
    pool_size = round(share * per_layer / 0.75) if per_layer > 1 else 0
    pool = [names.new() for _ in range(pool_size)]
    membership: dict[str, list[str]] = {layer: [] for layer in LAYERS}
    for n in pool:
        k = rng.randint(2, 4)
        for layer in sorted(rng.sample(LAYERS, k), key=LAYERS.index):
            membership[layer].append(n)
    plan: dict[str, list[str]] = {}
    for layer in LAYERS:
        shared = membership[layer][:per_layer]
        own: list[str] = []
        while len(shared) + len(own) < per_layer:
            # ~5%: a prefix-extension of a name already in this layer
            prev = shared + own
            if prev and rng.random() < 0.05:
                ext = names.extend(rng.choice(prev))
                if ext is not None:
                    own.append(ext)
                    continue
            own.append(names.new())
        layer_names = shared + own
        rng.shuffle(layer_names)
        plan[layer] = layer_names
    return plan


def generate(per_layer: int, seed: int, share: float, refs_frac: float = 0.30):
    """Yield (virtual_path, content) for every file, in a deterministic order."""
    plan = plan_layers(per_layer, seed, share)
    for layer in LAYERS:
        for name in plan[layer]:
            rng = random.Random(f"skill:{seed}:{layer}:{name}")
            yield f"/{layer}/{name}/SKILL.md", make_skill_md(rng, name, layer)
            if rng.random() < refs_frac:
                for i in range(rng.randint(1, 3)):
                    fname = ["REFERENCE.md", "forms.md", "api.md", "examples.md"][i] if i < 4 else f"ref-{i}.md"
                    yield f"/{layer}/{name}/references/{fname}", make_reference(rng)


def expected_result(files: dict[str, str]) -> dict:
    """The skills a deepagents-compatible loader yields, in deepagents' order."""
    winners: dict[str, dict] = {}
    for layer in LAYERS:
        dirs = sorted(
            {p.split("/")[2] for p in files if p.startswith(f"/{layer}/") and p.endswith("/SKILL.md") and p.count("/") == 3},
            key=lambda d: f"/{layer}/{d}/",
        )
        for d in dirs:
            # name == dir name for every generated skill; dict keeps first position
            winners[d] = {"name": d, "path": f"/{layer}/{d}/SKILL.md", "layer": layer}
    skill_md = [p for p in files if p.endswith("/SKILL.md")]
    h = hashlib.sha256()
    for p in sorted(files):
        h.update(p.encode() + b"\0" + files[p].encode() + b"\0")
    return {
        "digest_sha256": h.hexdigest(),
        "sources": [f"/{layer}/" for layer in LAYERS],
        "skill_md_files": len(skill_md),
        "skill_md_bytes": sum(len(files[p].encode()) for p in skill_md),
        "all_files": len(files),
        "all_bytes": sum(len(c.encode()) for c in files.values()),
        "skills_after_overrides": len(winners),
        "overridden": len(skill_md) - len(winners),
        "skills": list(winners.values()),
    }


def tree(per_layer: int, seed: int = 20240611, share: float = 0.20) -> dict[str, str]:
    """The whole tree as {virtual_path: content}."""
    return dict(generate(per_layer, seed, share))


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Writes `files` under `root` (virtual paths relative to it)."""
    for vpath, content in files.items():
        path = root / vpath.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
