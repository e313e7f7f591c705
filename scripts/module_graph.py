#!/usr/bin/env python3
"""The import graph of a crate's modules, file by file, and its loops.

Reads every `.rs` file under a crate's `src/`, finds each reference to
another module of the crate (`use crate::...`, `super::`, `self::`, a
child module by name, and `crate::a::b` written inline), follows
`pub use` re-exports to the file that defines the name, and prints the
strongly connected components of the graph. Exits 1 when a component
holds more than `--max-loop` files (2 by default: a parent and its child
may name each other).

    scripts/module_graph.py [--src src] [--max-loop 2] [--edges]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_of(path: Path, src: Path) -> tuple[str, ...]:
    """The module path a file defines: src/a/b.rs -> (a, b); src/a/mod.rs -> (a,)."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return tuple(parts)


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # String literals may hold `crate::` in messages; blank them out.
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    # A file's unit tests (`#[cfg(test)] mod tests`, last by convention) are
    # a module of their own whose `super` is the file: not the file's imports.
    return re.split(r"#\[cfg\(test\)\]\s*mod\s", text)[0]


def expand_use_tree(tree: str) -> list[list[str]]:
    """`a::{b, c::{d, e}}` -> [[a, b], [a, c, d], [a, c, e]]."""
    tree = re.sub(r"\s+", "", tree)

    def parse(s: str, i: int, prefix: list[str]) -> tuple[list[list[str]], int]:
        out: list[list[str]] = []
        path = list(prefix)
        while i < len(s):
            if s[i] == "{":
                i += 1
                while True:
                    sub, i = parse(s, i, path)
                    out.extend(sub)
                    if i < len(s) and s[i] == ",":
                        i += 1
                        continue
                    if i < len(s) and s[i] == "}":
                        i += 1
                    break
                return out, i
            m = re.match(rf"({IDENT}|\*)(?:as{IDENT})?", s[i:])
            if not m:
                break
            name = m.group(1)
            i += len(m.group(0))
            path.append(name)
            if s[i : i + 2] == "::":
                i += 2
                continue
            break
        if path != prefix:
            out.append(path)
        return out, i

    paths, _ = parse(tree, 0, [])
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default="src")
    parser.add_argument("--max-loop", type=int, default=2)
    parser.add_argument("--edges", action="store_true", help="print every edge")
    args = parser.parse_args()
    src = Path(args.src)

    files = sorted(p for p in src.rglob("*.rs"))
    modules = {module_of(p, src): p for p in files}
    texts = {module_of(p, src): strip_comments(p.read_text()) for p in files}

    # Re-exports: (module, name) -> the module the name comes from.
    reexports: dict[tuple[tuple[str, ...], str], tuple[str, ...]] = {}
    uses: dict[tuple[str, ...], list[list[str]]] = {}
    for module, text in texts.items():
        found: list[list[str]] = []
        for m in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text):
            for path in expand_use_tree(m.group(2)):
                # A re-export is a facade, not a dependency: users of the
                # name are pointed at the module that defines it.
                if not m.group(1):
                    found.append(path)
                else:
                    reexports[(module, path[-1])] = resolve(module, path[:-1], modules) or ()
        without_uses = re.sub(r"\buse\s+[^;]+;", "", text)
        for m in re.finditer(rf"(?<![:\w])(crate|super|self)((?:::{IDENT})+)", without_uses):
            found.append([m.group(1)] + m.group(2).split("::")[1:])
        uses[module] = found

    edges: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in modules}
    for module, paths in uses.items():
        for path in paths:
            target = resolve(module, path, modules)
            if target is None:
                continue
            # A name re-exported by the target stands for its defining module.
            for name in path[len(target) :][:1] or path[-1:]:
                seen = set()
                while (target, name) in reexports and target not in seen:
                    seen.add(target)
                    nxt = reexports[(target, name)]
                    if not nxt:
                        break
                    target = nxt
            if target != module and target in modules and target != ():
                edges[module].add(target)

    if args.edges:
        for module in sorted(edges):
            for target in sorted(edges[module]):
                print(f"{'::'.join(module)} -> {'::'.join(target)}")

    loops = [c for c in strongly_connected(edges) if len(c) > 1]
    worst = 0
    for component in sorted(loops, key=len, reverse=True):
        worst = max(worst, len(component))
        names = ", ".join(sorted("::".join(m) for m in component))
        print(f"loop of {len(component)} files: {names}")
    if not loops:
        print("no loops")
    if worst > args.max_loop:
        print(f"FAIL: a loop of {worst} files (at most {args.max_loop} allowed)")
        return 1
    return 0


def resolve(module: tuple[str, ...], path: list[str], modules) -> tuple[str, ...] | None:
    """The longest module file a `use` path names, or None for outside the crate."""
    if not path:
        return None
    head, rest = path[0], path[1:]
    if head == "crate":
        base: tuple[str, ...] = ()
    elif head == "super":
        base = module[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    elif head == "self":
        base = module
    elif module + (head,) in modules:
        base, rest = module + (head,), rest
    else:
        return None
    target = base
    for part in rest:
        if target + (part,) in modules:
            target = target + (part,)
        else:
            break
    return target


def strongly_connected(edges):
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    out: list = []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(component)

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
