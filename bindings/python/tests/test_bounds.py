"""The bounds of `SkillstoreBackend`'s listings and searches: `grep` reads
files one batch at a time and caps its matches and bytes, `glob` and `ls`
cap their results, and each says when it was cut short; and no listing,
search or read offers a path that no skill may offer."""

from __future__ import annotations

import os
import types

import pytest
from deepagents.middleware.filesystem import FilesystemMiddleware

import fixture_tree
import skillstore
from skillstore.deepagents import (
    DEFAULT_MAX_RESULTS,
    SkillstoreBackend,
    SkillstoreGlobResult,
    SkillstoreGrepResult,
    SkillstoreLsResult,
)

MIB = 1024 * 1024
SKILL_MD = "---\nname: {name}\ndescription: A skill.\n---\nBody.\n"


class Recording:
    """A namespace that keeps the report of every `grep` it answers."""

    def __init__(self, namespace):
        self.namespace = namespace
        self.reports = []

    def __getattr__(self, name):
        return getattr(self.namespace, name)

    def grep(self, *args, **kwargs):
        report = self.namespace.grep(*args, **kwargs)
        self.reports.append(report)
        return report


def big_files(root, count, size, line="a line that matches the word needle, padded to a hundred bytes"):
    """`count` files of `size` bytes in the skill `big`, every line holding
    `needle` (when `line` does)."""
    skill = root / "big"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD.format(name="big"))
    text = (line.ljust(99) + "\n").encode()
    data = (text * (size // len(text) + 1))[:size]
    for i in range(count):
        (skill / f"data{i:02}.txt").write_bytes(data)
    return skill


def test_python_skillstorebackend_grep_is_unbounded(tmp_path):
    """Finding: `grep` read every file under the path at once and returned
    every match (10 files of 10 MiB: 1,048,571 matches, `truncated=False`,
    +577 MiB). Now the files are read one at a time (under the default read
    limit) and let go, and the matches stop at the cap, saying so."""
    big_files(tmp_path, count=4, size=4 * MIB)
    ns = Recording(skillstore.Namespace(str(tmp_path)))
    backend = SkillstoreBackend(namespace=ns)
    result = backend.grep("needle")
    assert isinstance(result, SkillstoreGrepResult)
    assert result.error is None
    assert len(result.matches) == DEFAULT_MAX_RESULTS
    assert result.truncated is True
    assert result.truncation_reason == "budget"
    assert result.limit == "max_results"
    assert result.matches[0] == {"path": "/big/data00.txt", "line": 1, "text": result.matches[0]["text"]}
    assert "needle" in result.matches[0]["text"]
    [report] = ns.reports
    # One file at a time, and only as many as the cap needed: SKILL.md
    # and the first data file.
    assert report.max_batch == 1
    assert report.peak_bytes == 4 * MIB
    assert report.files_searched == 2 and report.bytes_read == 4 * MIB + len(SKILL_MD.format(name="big"))

    # The cap is settable; `max_count` narrows it further.
    result = SkillstoreBackend(str(tmp_path), max_results=10).grep("needle")
    assert len(result.matches) == 10 and result.truncated and result.limit == "max_results"
    result = backend.grep("needle", max_count=3)
    assert len(result.matches) == 3 and result.truncated and result.limit == "max_count"


def test_grep_stops_at_its_byte_budget_with_files_left(tmp_path):
    big_files(tmp_path, count=6, size=2 * MIB, line="nothing to find here")
    ns = Recording(skillstore.Namespace(str(tmp_path)))
    result = SkillstoreBackend(namespace=ns, max_grep_bytes=5 * MIB).grep("needle")
    assert result.matches == []
    assert result.truncated and result.truncation_reason == "budget" and result.limit == "max_grep_bytes"
    [report] = ns.reports
    # The batch that crosses the budget is the last: SKILL.md and three
    # of the data files.
    assert report.bytes_read == 6 * MIB + len(SKILL_MD.format(name="big")) and report.files_searched == 4
    assert report.max_batch == 1 and report.peak_bytes == 2 * MIB
    # Everything read when the budget allows.
    result = SkillstoreBackend(str(tmp_path)).grep("needle")
    assert result.matches == [] and result.truncated is False and result.limit is None


def test_grep_reads_in_batches_bounded_by_the_read_limit(tmp_path):
    skill = tmp_path / "small"
    skill.mkdir()
    (skill / "SKILL.md").write_text(SKILL_MD.format(name="small"))
    for i in range(100):
        (skill / f"f{i:03}.md").write_text(f"line {i}\nneedle {i}\n")
    ns = skillstore.Namespace(str(tmp_path), max_file_bytes=1 * MIB)
    files = sorted(e.path for e in ns.walk("/small")[0] if e.kind == "file")
    report = ns.grep("needle", files)
    # 16 MiB of batch over a 1 MiB read limit: 16 files at a time.
    assert report.max_batch == 16
    assert report.truncated is False and report.reason is None
    assert report.files_searched == 101 and report.files_skipped == 0
    assert [m[0] for m in report.matches] == [f for f in files if "/f" in f]
    assert report.matches[0] == ("/small/f000.md", 2, "needle 0")
    assert ns.grep("needle", files, batch_bytes=1).max_batch == 1


def test_grep_matches_lines_as_deepagents_does(tmp_path):
    skill = tmp_path / "s"
    skill.mkdir()
    (skill / "a.md").write_text("x needle needle\r\nno\n\nneedle at the end")
    (skill / "b.bin").write_bytes(b"needle \xff\xfe not utf-8\n")
    (skill / "c.md").write_text("é" * 50 + "needle" + "é" * 5000 + "\n")
    ns = skillstore.Namespace(str(tmp_path))
    report = ns.grep("needle", ["/s/a.md", "/s/b.bin", "/s/c.md", "/s/missing.md"])
    assert report.matches[:2] == [("/s/a.md", 1, "x needle needle\r"), ("/s/a.md", 4, "needle at the end")]
    path, line, text = report.matches[2]
    assert (path, line) == ("/s/c.md", 1) and len(text) == 2000 and text.startswith("é" * 50 + "needle")
    assert len(report.matches) == 3
    assert report.files_searched == 2 and report.files_skipped == 2
    # An empty pattern matches every line, as `"" in line` does.
    assert [m[1] for m in ns.grep("", ["/s/a.md"]).matches] == [1, 2, 3, 4]
    assert ns.grep("a\nb", ["/s/a.md"]).matches == []


def many_files(root, count):
    skill = root / "many"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD.format(name="many"))
    for i in range(count):
        (skill / f"note{i:04}.md").write_text("needle\n")
    return skill


def test_ls_and_glob_are_capped_and_say_so(tmp_path):
    many_files(tmp_path, 1500)
    backend = SkillstoreBackend(str(tmp_path))
    listed = backend.ls("/many")
    assert isinstance(listed, SkillstoreLsResult)
    assert len(listed.entries) == DEFAULT_MAX_RESULTS
    assert listed.truncated and listed.truncation_reason == "budget" and listed.limit == "max_results"
    assert listed.entries[0]["path"] == "/many/SKILL.md"
    globbed = backend.glob("*.md")
    assert isinstance(globbed, SkillstoreGlobResult)
    assert len(globbed.matches) == DEFAULT_MAX_RESULTS
    assert globbed.truncated and globbed.truncation_reason == "budget" and globbed.limit == "max_results"
    # Settable, and nothing is flagged when everything fits.
    small = SkillstoreBackend(str(tmp_path), max_results=2000)
    assert len(small.ls("/many").entries) == 1501 and not small.ls("/many").truncated
    assert len(small.glob("*.md").matches) == 1501 and not small.glob("*.md").truncated
    assert small.ls("/many").limit is None
    # The walk below the path is bounded too, and says so.
    walked = SkillstoreBackend(str(tmp_path), max_walk=100).glob("*.md")
    assert len(walked.matches) < 100 and walked.truncated and walked.limit == "max_walk"
    grepped = SkillstoreBackend(str(tmp_path), max_walk=100).grep("needle")
    assert len(grepped.matches) < 100 and grepped.truncated and grepped.limit == "max_walk"


def test_namespace_listings_take_a_bound(tmp_path):
    many_files(tmp_path, 50)
    ns = skillstore.Namespace(str(tmp_path))
    assert [e.name for e in ns.ls("/many", max_entries=3)] == ["SKILL.md", "note0000.md", "note0001.md"]
    assert len(ns.ls("/many")) == 51
    entries, cut = ns.walk("/", max_entries=10)
    assert len(entries) == 10 and cut
    entries, cut = ns.walk("/", max_entries=52)
    assert len(entries) == 52 and not cut


def tools(backend):
    runtime = types.SimpleNamespace(tool_call_id="call-1", state={"messages": []}, config={}, context=None, store=None)
    found = {t.name: t for t in FilesystemMiddleware(backend=backend).tools}

    def call(name, **args):
        result = found[name].func(runtime=runtime, **args)
        return str(getattr(result, "content", result))

    return call


def test_deepagents_tools_tell_the_agent_a_result_was_cut(tmp_path):
    many_files(tmp_path, 30)
    call = tools(SkillstoreBackend(str(tmp_path), max_results=5))
    grepped = call("grep", pattern="needle", output_mode="content")
    assert "stopped early" in grepped and grepped.count("needle") >= 5
    globbed = call("glob", pattern="*.md")
    assert "stopped early" in globbed
    assert "/many/SKILL.md" in call("ls", path="/many")


# -- paths no skill offers ---------------------------------------------------

HIDDEN = {
    "/skills/pdf/.git/config": "[core]\n\tfsmonitor = echo SECRET-git-config\n",
    "/skills/pdf/.GIT/HEAD": "ref: SECRET-git-head\n",
    "/skills/pdf/.env": "TOKEN=SECRET-env\n",
    "/skills/pdf/scripts/.hidden": "SECRET-hidden\n",
}
RESERVED = {"/skills/pdf/.skillstore/notes": "SECRET-reserved\n"}
OFFERED = {
    "/skills/pdf/SKILL.md": "---\nname: pdf\ndescription: Read PDFs.\n---\nVISIBLE body.\n",
    "/skills/pdf/scripts/run.sh": "echo VISIBLE\n",
    "/skills/pdf/.skillstore/signature": "VISIBLE signature\n",
}


def offered_only(tmp_path, withheld):
    fixture_tree.write_tree(tmp_path, {**OFFERED, **withheld})
    ns = skillstore.Namespace(mounts={"/skills": str(tmp_path / "skills")}, sources=["/skills"])
    return ns, SkillstoreBackend(namespace=ns)


def assert_never_offered(ns, backend, withheld, offered):
    """No path of `withheld` is listed, globbed, grepped, walked, stat'ed or
    read, by the namespace or the backend; `offered` paths are."""
    names = {p.rsplit("/", 1)[1] for p in withheld}
    listings = [backend.ls("/skills/pdf"), backend.ls("/skills/pdf/scripts")]
    listed = {i["path"] for r in listings for i in r.entries}
    assert not set(withheld) & listed
    walked = {e.path for e in ns.walk("/skills")[0]}
    assert not set(withheld) & walked, walked
    assert set(offered) <= walked
    globbed = set()
    for pattern in ["**", "*", ".*", "**/.*", "**/.*/*", *names, *(f"**/{n}" for n in names)]:
        globbed |= {m["path"] for m in backend.glob(pattern, "/skills").matches}
    assert not set(withheld) & globbed, globbed
    grepped = backend.grep("SECRET", "/skills")
    assert grepped.matches == [], grepped.matches
    assert {m["path"] for m in backend.grep("VISIBLE", "/skills").matches} == set(offered)
    report = ns.grep("SECRET", sorted(withheld))
    assert report.matches == [] and report.files_searched == 0
    for path in withheld:
        assert "SECRET" not in str(backend.read(path)), path
        assert backend.read(path).error is not None, path
        [download] = backend.download_files([path])
        assert download.content is None and download.error == "file_not_found", path
        for call in (ns.stat, ns.read):
            with pytest.raises(skillstore.NotFoundError):
                call(path)
        assert isinstance(ns.read_many([path])[0], skillstore.NotFoundError)
    for path in offered:
        assert backend.read(path).error is None, path


def test_a_skill_never_offers_its_reserved_directory_beyond_the_signature(tmp_path):
    ns, backend = offered_only(tmp_path, RESERVED)
    assert_never_offered(ns, backend, RESERVED, OFFERED)
    assert {i["path"] for i in backend.ls("/skills/pdf/.skillstore").entries} == {"/skills/pdf/.skillstore/signature"}


def test_a_skill_never_offers_git_or_hidden_paths(tmp_path):
    """A `.git` entry in any case and any other hidden path inside a skill
    (the library's content rule) is never listed, globbed, grepped or read:
    each listing, search and read asks the rule of every path."""
    ns, backend = offered_only(tmp_path, HIDDEN)
    assert_never_offered(ns, backend, HIDDEN, OFFERED)
    listed = {i["path"] for i in backend.ls("/skills/pdf").entries}
    assert not {"/skills/pdf/.git/", "/skills/pdf/.GIT/", "/skills/pdf/.env"} & listed, listed
    assert "/skills/pdf/scripts/.hidden" not in {i["path"] for i in backend.ls("/skills/pdf/scripts").entries}
    assert backend.ls("/skills/pdf/.git").error is not None
    assert ns.walk("/skills/pdf")[0] and not any("/.git" in e.path.lower() for e in ns.walk("/skills")[0])


def test_a_link_with_an_innocent_name_never_offers_a_hidden_file(tmp_path):
    """Finding: `notes.txt -> .env`, `gitlink -> .git` and `res.txt ->
    .skillstore/notes` served the hidden bytes to read, grep and
    download_files, though the hidden paths themselves were refused. A
    read inside a skill is confined to it, and follows no link to a hidden
    name."""
    fixture_tree.write_tree(tmp_path, {**OFFERED, **HIDDEN, **RESERVED})
    skill = tmp_path / "skills" / "pdf"
    os.symlink(".env", skill / "notes.txt")
    os.symlink(".git", skill / "gitlink")
    os.symlink(".skillstore/notes", skill / "res.txt")
    os.symlink("../../outside.txt", skill / "out.txt")
    (tmp_path / "outside.txt").write_text("SECRET-outside\n")
    ns = skillstore.Namespace(mounts={"/skills": str(tmp_path / "skills")}, sources=["/skills"])
    backend = SkillstoreBackend(namespace=ns)
    for path in ["/skills/pdf/notes.txt", "/skills/pdf/gitlink/config", "/skills/pdf/res.txt"]:
        assert "SECRET" not in str(backend.read(path)), path
        assert backend.read(path).error is not None, path
        [download] = backend.download_files([path])
        assert download.content is None, path
    assert backend.grep("SECRET", "/skills").matches == []
    assert "VISIBLE" in str(backend.read("/skills/pdf/scripts/run.sh"))
