"""The storage guards from Python: the hostile-path corpus through every
method returns nothing from outside; concurrent calls from threads and
from asyncio neither deadlock nor hold the GIL."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import fixture_tree
import skillstore
from conftest import SMALL
from skillstore._native import testkit
from skillstore.deepagents import SkillstoreBackend

REFUSED, LOOKALIKES = testkit.hostile_paths()
SECRET = "outside-secret-text"


@pytest.fixture
def guarded(tmp_path):
    """A namespace on `root`, beside a directory holding a secret, with
    links from inside to it."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "SKILL.md").write_text(f"---\nname: x\ndescription: {SECRET}\n---\n{SECRET}\n")
    root = tmp_path / "root"
    fixture_tree.write_tree(root, SMALL)
    (root / "base" / "link").symlink_to(tmp_path / "outside")
    (root / "base" / "pdf" / "leak.md").symlink_to(tmp_path / "outside" / "SKILL.md")
    ns = skillstore.Namespace(str(root), sources=["/base", "/team"], writable=["team"])
    return ns, tmp_path


def test_corpus_is_large():
    assert len(REFUSED) >= 450 and len(LOOKALIKES) >= 50


def test_refused_paths_are_refused_by_every_namespace_method(guarded):
    ns, tmp_path = guarded
    calls = [
        ns.ls,
        ns.stat,
        ns.read,
        ns.walk,
        lambda p: ns.write(p, b"x"),
        lambda p: ns.delete(p),
    ]
    for path in REFUSED:
        for call in calls:
            with pytest.raises(skillstore.SkillstoreError) as e:
                call(path)
            assert e.value.kind == "invalid_path", (path, e.value.kind)
            assert str(tmp_path) not in str(e.value)
        result = ns.read_many([path])[0]
        assert isinstance(result, skillstore.RefusedPathError)
    assert not any(p.name != "SKILL.md" for p in (tmp_path / "outside").iterdir())


def test_lookalikes_lead_only_to_their_literal_name(guarded):
    ns, tmp_path = guarded
    for path in LOOKALIKES:
        for call in (ns.ls, ns.stat, ns.read):
            try:
                got = call(path)
            except skillstore.SkillstoreError as e:
                assert e.kind in ("not_found", "invalid_path", "not_a_directory"), (path, e.kind)
                assert str(tmp_path) not in str(e)
            else:
                pytest.fail(f"{path!r} found something: {got!r}")


def test_catalog_reads_refuse_the_corpus_and_links_out(guarded):
    ns, tmp_path = guarded
    catalog = ns.load()
    assert "x" not in catalog
    assert SECRET not in catalog.render_prompt()
    editor = ns.editor()
    before = {p for p in tmp_path.rglob("*") if not p.is_dir()}
    for path in REFUSED[:200] + ["leak.md"]:
        relative = path.lstrip("/")
        for call in (
            lambda: catalog.read_file("pdf", relative),
            lambda: catalog.read_file("pdf", path),
        ):
            try:
                data = call()
            except skillstore.SkillstoreError as e:
                assert str(tmp_path) not in str(e)
            else:
                assert SECRET.encode() not in data
        # Some corpus paths are legal names once relative to a skill (a
        # backslash or a colon is an ordinary byte): such a write lands,
        # but only inside the writable source.
        try:
            editor.write_file("pdf", relative, b"x")
        except skillstore.SkillstoreError as e:
            assert str(tmp_path) not in str(e)
    created = {p for p in tmp_path.rglob("*") if not p.is_dir()} - before
    team = tmp_path / "root" / "team"
    assert all(team in p.parents for p in created), sorted(map(str, created))
    assert [p.name for p in (tmp_path / "outside").iterdir()] == ["SKILL.md"]


def test_deepagents_backend_returns_nothing_from_outside(guarded):
    _, tmp_path = guarded
    backend = SkillstoreBackend(str(tmp_path / "root"), writable=True)
    for path in REFUSED + LOOKALIKES + ["/base/link/SKILL.md", "/base/pdf/leak.md", "/base/link"]:
        results = [
            backend.ls(path),
            backend.read(path),
            backend.glob("*", path),
            backend.grep(SECRET[:10], path),
            backend.edit(path, "a", "b"),
            backend.write(path + "-new" if path.startswith("/") else path, "x"),
            backend.delete(path),
        ]
        results += backend.download_files([path]) + backend.upload_files([(path, b"x")])
        text = repr(results)
        assert SECRET not in text, path
        assert str(tmp_path) not in text, path
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["SKILL.md"]


def test_other_threads_run_while_a_load_is_in_progress(tree25):
    """With involuntary thread switches made practically impossible (a
    switch interval of an hour), another Python thread can only run while
    this one gives the GIL up itself. It ticks during `load()`, and only
    then: so the load releases the GIL."""
    root, _ = tree25
    ns = skillstore.Namespace(str(root), sources=["/base", "/user", "/project", "/team"])
    started = threading.Event()
    done = threading.Event()
    ticks = 0

    def count():
        nonlocal ticks
        started.set()
        while not done.is_set():
            ticks += 1
            time.sleep(0)  # gives the GIL back at once

    interval = sys.getswitchinterval()
    sys.setswitchinterval(3600)
    counter = threading.Thread(target=count)
    try:
        counter.start()
        started.wait()
        before = ticks
        idle = sum(range(100_000))  # pure Python: the other thread cannot run
        still = ticks
        catalog = ns.load()
        after = ticks
    finally:
        done.set()
        counter.join()
        sys.setswitchinterval(interval)
    assert idle and len(catalog) == 89
    assert still == before
    assert after > still


def test_many_concurrent_calls_from_a_thread_pool(tree25):
    root, _ = tree25
    ns = skillstore.Namespace(str(root), sources=["/base", "/user", "/project", "/team"], writable=["team"])
    catalog = ns.load()
    names = catalog.names()

    def work(i):
        name = names[i % len(names)]
        text = catalog.read_skill(name)
        if i % 10 == 0:
            assert len(ns.load()) == 89
        if i % 7 == 0:
            catalog.refresh()
        return name, text

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(work, range(400)))
    assert all(text.startswith("---") for _, text in results)


def test_many_concurrent_calls_from_asyncio(tree25):
    root, _ = tree25
    ns = skillstore.Namespace(str(root), sources=["/base", "/user", "/project", "/team"])

    async def main():
        catalog = await ns.aload()
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        texts = await asyncio.gather(*(catalog.aread_skill(n) for n in catalog.names() * 3))
        catalogs = await asyncio.gather(*(ns.aload() for _ in range(8)))
        stop.set()
        await task
        return texts, catalogs, ticks

    texts, catalogs, ticks = asyncio.run(main())
    assert len(texts) == 89 * 3 and all(t.startswith("---") for t in texts)
    assert all(len(c) == 89 for c in catalogs)
    assert ticks > 0


def test_walks_do_not_descend_into_directory_links(tmp_path):
    """A link such as `a/up -> ..` inside the root is listed once and never
    walked into: `walk`, and deepagents' `glob` over it, end with each file
    once instead of running to their entry limit."""
    root = tmp_path / "root"
    (root / "base" / "pdf" / "a").mkdir(parents=True)
    (root / "base" / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: PDFs.\n---\n")
    (root / "base" / "pdf" / "a" / "x.md").write_text("x")
    (root / "base" / "pdf" / "a" / "up").symlink_to("..")
    (root / "base" / "pdf" / "b").symlink_to(".")
    ns = skillstore.Namespace(str(root), sources=["/base"])
    entries, truncated = ns.walk("/base", max_entries=10_000)
    paths = sorted(e.path for e in entries)
    assert not truncated
    assert paths.count("/base/pdf/a/x.md") == 1, paths
    assert not any("/up/" in p or "/b/" in p for p in paths), paths
    backend = SkillstoreBackend(str(root))
    found = backend.glob("**/*.md", "/")
    assert found.error is None, found.error
    names = sorted(m["path"] for m in found.matches)
    assert sum(1 for n in names if n.endswith("/x.md")) == 1, names
