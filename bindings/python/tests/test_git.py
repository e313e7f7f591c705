"""The package over a Git source: a repository made by the real `git`,
opened as `git+file://` at a branch, a tag and a commit."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import fixture_tree
import skillstore

SKILLS = {
    "/base/pdf/SKILL.md": "---\nname: pdf\ndescription: Read PDFs.\n---\n# PDF\nUse pdftotext.\n",
    "/base/pdf/references/forms.md": "# Forms\n",
    "/team/csv/SKILL.md": "---\nname: csv\ndescription: Read CSV spreadsheets.\n---\nRows.\n",
    "/team/pdf/SKILL.md": "---\nname: pdf\ndescription: Read PDFs, the team's way.\n---\n# PDF\n",
    "/team/pdf/references/forms.md": "# Forms, the team's way\n",
}


def git(work: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "tests",
        "GIT_AUTHOR_EMAIL": "tests@example.invalid",
        "GIT_COMMITTER_NAME": "tests",
        "GIT_COMMITTER_EMAIL": "tests@example.invalid",
    }
    done = subprocess.run(["git", "-C", str(work), *args], check=True, capture_output=True, text=True, env=env)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository with the skills committed on `main` and tagged `v1`:
    (work tree, first commit)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SKILLSTORE_GIT_CACHE", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    fixture_tree.write_tree(work, SKILLS)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "skills")
    git(work, "tag", "v1")
    return work, git(work, "rev-parse", "HEAD")


def add_skill(work: Path, name: str) -> str:
    fixture_tree.write_tree(work, {f"/team/{name}/SKILL.md": f"---\nname: {name}\ndescription: The {name} skill.\n---\n"})
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", name)
    return git(work, "rev-parse", "HEAD")


def open_git(work: Path, ref: str | None = "main") -> skillstore.Namespace:
    location = f"git+file://{work}" + (f"@{ref}" if ref else "")
    return skillstore.Namespace(location, sources=["/base", "/team"])


@pytest.mark.parametrize("ref", ["main", "v1", None, "commit"])
def test_a_repository_lists_and_reads_with_the_commit_as_provenance(repo, ref):
    work, first = repo
    ns = open_git(work, first if ref == "commit" else ref)
    catalog = ns.load()
    assert sorted(catalog.names()) == ["csv", "pdf"]
    assert [d.kind for d in catalog.diagnostics] == []
    pdf = catalog["pdf"]
    assert (pdf.source, pdf.path) == ("team", "/team/pdf/SKILL.md")
    assert [s.path for s in pdf.shadowed] == ["/base/pdf/SKILL.md"]
    assert {s.commit for s in catalog} == {first}
    assert pdf.to_dict()["commit"] == first
    assert [commit for _, commit in ns.git_commits] == [first]
    assert catalog.read_skill("pdf") == SKILLS["/team/pdf/SKILL.md"]
    assert catalog.read_file("pdf", "references/forms.md") == b"# Forms, the team's way\n"
    assert sorted(catalog.list_files("pdf")[0]) == ["SKILL.md", "references/forms.md"]
    assert ns.read("/base/pdf/references/forms.md").data == b"# Forms\n"
    # A file's version is its blob id, as git gives it.
    blob = git(work, "rev-parse", f"{first}:team/csv/SKILL.md")
    assert ns.stat("/team/csv/SKILL.md").version == blob
    with pytest.raises(skillstore.RefusedPathError):
        catalog.read_file("pdf", "../../base/pdf/SKILL.md")
    with pytest.raises(skillstore.ReadOnlyError):
        ns.write("/team/new.md", b"x")


def test_a_moved_branch_is_seen_once_the_namespace_is_reopened_and_a_tag_stays(repo):
    work, first = repo
    branch = open_git(work, "main")
    tag = open_git(work, "v1")
    catalog = branch.load()
    second = add_skill(work, "xlsx")
    # The namespace reads the commit it fetched; its catalog's refresh too.
    assert sorted(catalog.refresh().names()) == ["csv", "pdf"]
    reopened = branch.reopen()
    assert [commit for _, commit in reopened.git_commits] == [second]
    moved = reopened.load()
    assert sorted(moved.names()) == ["csv", "pdf", "xlsx"]
    assert {s.commit for s in moved} == {second}
    assert moved.read_skill("xlsx").startswith("---\nname: xlsx\n")
    # And its catalogs refresh from then on at the new commit.
    assert sorted(moved.refresh().names()) == ["csv", "pdf", "xlsx"]
    # The tag did not move.
    for ns in (tag, tag.reopen()):
        pinned = ns.load()
        assert sorted(pinned.names()) == ["csv", "pdf"]
        assert {s.commit for s in pinned} == {first}


def test_a_reference_the_remote_does_not_have_is_a_usage_error(repo):
    work, _ = repo
    with pytest.raises(skillstore.UsageError):
        open_git(work, "no-such-branch")


def test_search_and_digests_over_a_repository(repo):
    work, first = repo
    ns = open_git(work)
    assert ns.search("spreadsheets")[0].path == "/team/csv/SKILL.md"
    lock = json.loads(ns.lock())
    assert lock["git"] == [{"location": f"git+file://{work}@main", "commit": first}]
    assert {s["name"]: s["commit"] for s in lock["skills"]} == {"csv": first, "pdf": first}


def test_a_locked_commit_refuses_a_moved_branch(repo, tmp_path):
    work, _ = repo
    (tmp_path / "skillstore.lock").write_text(open_git(work).lock())
    config = f"mounts:\n  - at: /\n    location: git+file://{work}@main\nsources:\n  - path: /team\nlock: skillstore.lock\n"
    assert skillstore.Namespace.from_yaml(config, base_dir=tmp_path).load().names() == ["csv", "pdf"]
    add_skill(work, "xlsx")
    with pytest.raises(skillstore.SkillstoreError) as e:
        skillstore.Namespace.from_yaml(config, base_dir=tmp_path)
    assert "lock" in str(e.value)
