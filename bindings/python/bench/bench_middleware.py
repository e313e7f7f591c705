"""Loading skills through deepagents' `SkillsMiddleware` three ways, in one
process, on the generated layered tree:

1. deepagents' middleware over deepagents' `FilesystemBackend`;
2. deepagents' middleware over `SkillstoreBackend`;
3. `FastSkillsMiddleware` (the catalog from one Rust call).

Each load is the middleware's own `before_agent` hook; the rendered prompt
sections are checked to be identical before anything is timed.

    python bench/bench_middleware.py --per-layer 2500 --repeats 5
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fixture_tree  # noqa: E402
from deepagents.backends.filesystem import FilesystemBackend  # noqa: E402
from deepagents.middleware.skills import SkillsMiddleware  # noqa: E402
from langchain.agents.middleware.types import ModelRequest  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402

from skillstore.deepagents import FastSkillsMiddleware, SkillstoreBackend  # noqa: E402

SOURCES = ["/base/", "/user/", "/project/", "/team/"]


def render(middleware, update) -> str:
    request = ModelRequest(
        model=GenericFakeChatModel(messages=iter(())),
        messages=[],
        system_message=None,
        state={"messages": [], **update},
        runtime=None,
    )
    return middleware.modify_request(request).system_message.text


def timed(middleware, repeats: int) -> tuple[float, dict]:
    update = middleware.before_agent({}, None, None)
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        update = middleware.before_agent({}, None, None)
        times.append(time.perf_counter() - start)
    return statistics.median(times), update


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-layer", type=int, default=2500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--root", type=Path, default=None, help="an existing generated tree (default: generate one)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        root = args.root
        if root is None:
            root = Path(scratch) / "tree"
            fixture_tree.write_tree(root, fixture_tree.tree(args.per_layer))
        backend = SkillstoreBackend(str(root))
        runs = {
            "deepagents SkillsMiddleware over FilesystemBackend": SkillsMiddleware(
                backend=FilesystemBackend(root_dir=root, virtual_mode=True), sources=SOURCES
            ),
            "deepagents SkillsMiddleware over SkillstoreBackend": SkillsMiddleware(backend=backend, sources=SOURCES),
            "FastSkillsMiddleware": FastSkillsMiddleware(backend=backend, sources=SOURCES),
        }
        results = {}
        prompts = set()
        for name, middleware in runs.items():
            seconds, update = timed(middleware, args.repeats)
            results[name] = (seconds, len(update["skills_metadata"]))
            prompts.add(render(middleware, update))
        if len(prompts) != 1:
            print("the three rendered prompt sections differ", file=sys.stderr)
            return 1
        reference = results["deepagents SkillsMiddleware over FilesystemBackend"][0]
        print(f"{args.per_layer} skills per layer, 4 layers; median of {args.repeats} loads (before_agent)")
        for name, (seconds, skills) in results.items():
            print(f"  {name:55s} {seconds * 1e3:9.1f} ms  {skills} skills  {reference / seconds:6.1f}x")
        print(f"  prompt sections identical ({len(prompts.pop())} characters)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
