"""The library from Python, on a directory, in memory and on S3."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import skillstore
from conftest import EXAMPLES, REPO, SMALL


def open_small(location, writable=()):
    return skillstore.Namespace(location, sources=["/base", "/team"], writable=list(writable))


def test_load_merges_with_provenance_and_diagnostics(small_location):
    catalog = open_small(small_location).load()
    assert catalog.names() == ["csv", "pdf"]
    pdf = catalog["pdf"]
    assert isinstance(pdf, skillstore.Skill)
    assert pdf.source == "team"
    assert pdf.path == "/team/pdf/SKILL.md"
    assert pdf.dir == "/team/pdf"
    assert pdf.description == "Read PDFs, the team's way."
    assert pdf.compatibility == "python3"
    assert pdf.license is None
    assert pdf.metadata == {"owner": "team", "version": "2"}
    assert pdf.enabled is True
    assert [(s.source, s.path) for s in pdf.shadowed] == [("base", "/base/pdf/SKILL.md")]
    assert catalog["csv"].allowed_tools == ("Read", "Grep")
    assert pdf.version
    assert "pdf" in catalog and "nope" not in catalog
    assert len(catalog) == 2
    assert [s.name for s in catalog] == ["csv", "pdf"]
    assert catalog.get("nope") is None
    with pytest.raises(KeyError):
        catalog["nope"]
    kinds = {(d.kind, d.path) for d in catalog.diagnostics}
    assert ("no_frontmatter", "/team/broken/SKILL.md") in kinds, kinds
    for d in catalog.diagnostics:
        assert d.severity in ("warning", "error")


def test_skills_are_frozen(small_location):
    pdf = open_small(small_location).load()["pdf"]
    with pytest.raises(AttributeError):
        pdf.name = "other"  # type: ignore[misc]
    pdf.metadata["owner"] = "changed"
    assert pdf.metadata["owner"] == "team"


def test_to_dict_has_the_list_json_fields(small_location):
    d = open_small(small_location).load()["pdf"].to_dict()
    assert list(d) == [
        "name",
        "description",
        "license",
        "compatibility",
        "metadata",
        "allowed_tools",
        "path",
        "source",
        "enabled",
        "shadowed",
    ]
    assert d["shadowed"] == [{"source": "base", "path": "/base/pdf/SKILL.md"}]


def test_read_skill_and_files(small_location):
    catalog = open_small(small_location).load()
    assert catalog.read_skill("pdf").startswith("---\nname: pdf\ndescription: Read PDFs, the team's way.")
    assert catalog.read_file("pdf", "references/forms.md") == b"Forms, the team's way.\n"
    files, cut = catalog.list_files("pdf")
    assert (sorted(files), cut) == (["SKILL.md", "references/forms.md"], False)
    with pytest.raises(skillstore.NotFoundError) as e:
        catalog.read_skill("nope")
    assert e.value.kind == "skill_not_found"
    with pytest.raises(skillstore.NotFoundError) as e:
        catalog.read_file("pdf", "references/none.md")
    assert e.value.kind == "not_found"
    assert e.value.path == "/team/pdf/references/none.md"
    for hostile in ("../csv/SKILL.md", "/etc/passwd", "references/../../csv/SKILL.md", "a//b", ""):
        with pytest.raises(skillstore.RefusedPathError) as e:
            catalog.read_file("pdf", hostile)
        assert e.value.kind == "invalid_path"


def test_render_prompt_styles_and_budget(small_location):
    catalog = open_small(small_location).load()
    markdown = catalog.render_prompt()
    assert "**pdf**: Read PDFs, the team's way." in markdown
    assert "/team/pdf/SKILL.md" in markdown
    xml = catalog.render_prompt(style="xml")
    assert "<available_skills>" in xml and "<name>pdf</name>" in xml
    small = catalog.render_prompt(max_chars=700)
    assert len(small) <= 700
    with pytest.raises(skillstore.UsageError) as e:
        catalog.render_prompt(style="html")
    assert e.value.kind == "usage"


def test_refresh_sees_a_change(small_location):
    ns = open_small(small_location, writable=["team"])
    catalog = ns.load()
    editor = ns.editor("team")
    editor.create("csv", b"---\nname: csv\ndescription: Team CSV.\n---\nBody\n")
    assert catalog["csv"].source == "base"
    fresh = catalog.refresh()
    assert fresh["csv"].source == "team"
    assert fresh["csv"].description == "Team CSV."


def test_editor_operations_with_version_conditions(small_location):
    ns = open_small(small_location, writable=["team"])
    editor = ns.editor(author="tests")
    assert editor.source == "team"
    created = editor.create("notes", b"---\nname: notes\ndescription: Take notes.\n---\nv1\n")
    assert created.action == "create"
    v1 = created.version_of("SKILL.md")
    assert v1

    with pytest.raises(skillstore.ConflictError) as e:
        editor.create("notes", b"---\nname: notes\ndescription: Again.\n---\n")
    assert e.value.kind == "already_exists"

    edited = editor.edit("notes", b"---\nname: notes\ndescription: Take notes well.\n---\nv2\n", expected=v1)
    v2 = edited.version_of()
    assert v2 and v2 != v1
    with pytest.raises(skillstore.ConflictError) as e:
        editor.edit("notes", b"---\nname: notes\ndescription: Lost update.\n---\n", expected=v1)
    assert e.value.kind == "version_conflict"

    patched = editor.patch("notes", "well", "carefully", expected=v2)
    assert patched.action == "patch"
    with pytest.raises(skillstore.ConflictError) as e:
        editor.patch("notes", "absent text", "x")
    assert e.value.kind == "patch_mismatch"

    wrote = editor.write_file("notes", "references/how.md", b"How.\n")
    assert wrote.version_of("references/how.md")
    catalog = ns.load()
    assert catalog["notes"].description == "Take notes carefully."
    assert catalog.read_file("notes", "references/how.md") == b"How.\n"

    removed = editor.remove_file("notes", "references/how.md")
    assert removed.version_of("references/how.md") is None

    with pytest.raises(skillstore.InvalidSkillError) as e:
        editor.create("bad", b"---\nname: Not_Valid\ndescription: x\n---\n")
    assert e.value.kind == "invalid_skill"
    assert e.value.problems

    history = editor.history("notes")
    assert [h["action"] for h in history] == ["create", "edit", "patch", "write_file", "remove_file"]
    assert all(h["author"] == "tests" for h in history)
    rolled = editor.rollback("notes", 1)
    assert rolled.action == "rollback"
    assert ns.load()["notes"].description == "Take notes."

    deleted = editor.delete("notes", expected=rolled.version_of())
    assert deleted.action == "delete"
    assert "notes" not in ns.load()


def test_writes_to_read_only_sources_are_refused(small_location):
    ns = open_small(small_location)
    with pytest.raises(skillstore.SkillstoreError) as e:
        ns.editor("team")
    assert e.value.kind == "read_only"
    assert isinstance(e.value, skillstore.ReadOnlyError)
    with pytest.raises(skillstore.ReadOnlyError) as e:
        ns.write("/base/new/SKILL.md", b"x")
    assert e.value.kind == "read_only"


def test_too_large_files_are_refused(small_location):
    # A dict is held in memory, not read from a file: the limit bounds each
    # of its files as it bounds a directory's or a bucket's.
    ns = skillstore.Namespace(small_location, sources=["/base", "/team"], max_file_bytes=100)
    catalog = ns.load()
    assert ("file_too_large", "/team/pdf/SKILL.md") in {(d.kind, d.path) for d in catalog.diagnostics}
    assert catalog["pdf"].source == "base"
    with pytest.raises(skillstore.TooLargeError) as e:
        ns.read("/team/pdf/SKILL.md")
    assert e.value.kind == "too_large"
    assert e.value.path == "/team/pdf/SKILL.md"
    with pytest.raises(skillstore.TooLargeError):
        skillstore.Namespace(small_location, sources=["/base"]).read("/base/pdf/SKILL.md", limit=10)


def test_namespace_files(small_location):
    ns = open_small(small_location)
    entries = ns.ls("/team")
    assert [(e.name, e.kind) for e in entries] == [("broken", "dir"), ("pdf", "dir")]
    blob = ns.read("/team/pdf/SKILL.md")
    assert blob.data == SMALL["/team/pdf/SKILL.md"].encode()
    assert blob.size == len(blob.data) and blob.version
    assert ns.read("/team/pdf/SKILL.md", prefix=3).data == b"---"
    assert ns.stat("/team/pdf/SKILL.md").kind == "file"
    results = ns.read_many(["/base/pdf/SKILL.md", "/base/none", "/../x"])
    assert isinstance(results[0], skillstore.Blob)
    assert isinstance(results[1], skillstore.NotFoundError) and results[1].kind == "not_found"
    assert isinstance(results[2], skillstore.RefusedPathError)
    walked, cut = ns.walk("/base")
    assert not cut
    assert [e.path for e in walked if e.kind == "file"] == [
        "/base/csv/SKILL.md",
        "/base/pdf/SKILL.md",
        "/base/pdf/references/forms.md",
    ]
    assert len(ns.walk("/", max_entries=2)[0]) == 2
    assert [s.name for s in ns.sources] == ["base", "team"]


def test_exception_families():
    assert issubclass(skillstore.SkillstoreError, Exception)
    for cls in (
        skillstore.NotFoundError,
        skillstore.RefusedPathError,
        skillstore.TooLargeError,
        skillstore.ConflictError,
        skillstore.UnavailableError,
        skillstore.ReadOnlyError,
        skillstore.InvalidSkillError,
        skillstore.UsageError,
    ):
        assert issubclass(cls, skillstore.SkillstoreError)


def test_symlink_escape_has_its_kind(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    root = tmp_path / "root"
    (root / "base" / "pdf").mkdir(parents=True)
    (root / "base" / "pdf" / "SKILL.md").write_text(SMALL["/base/pdf/SKILL.md"])
    (root / "base" / "pdf" / "leak.md").symlink_to(outside / "secret.md")
    ns = skillstore.Namespace(str(root), sources=["/base"])
    with pytest.raises(skillstore.RefusedPathError) as e:
        ns.load().read_file("pdf", "leak.md")
    assert e.value.kind == "symlink_escape"
    assert str(tmp_path) not in str(e.value)


def test_unreachable_s3_is_unavailable(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_MAX_RETRIES", "0")
    ns = skillstore.Namespace("s3://nowhere/prefix", sources=["/base"])
    catalog = ns.load()
    assert len(catalog) == 0
    assert {d.kind for d in catalog.diagnostics} == {"source_unavailable"}
    with pytest.raises(skillstore.UnavailableError) as e:
        ns.read("/base/x/SKILL.md")
    assert e.value.kind == "unavailable"
    assert e.value.path == "/base/x/SKILL.md"
    assert "127.0.0.1" not in str(e.value) and "nowhere" not in str(e.value).replace(e.value.path, "")


def test_load_config_and_yaml():
    ns = skillstore.load_config(REPO / "skillstore.yaml")
    assert [s.name for s in ns.sources] == ["base", "user", "project", "team"]
    catalog = ns.load()
    assert "code-review" in catalog
    assert catalog["code-review"].source == "project"
    same = skillstore.Namespace.from_yaml(
        "sources:\n  - path: /base\n  - path: /team\n    writable: true\n", base_dir=EXAMPLES
    )
    assert [s.writable for s in same.sources] == [False, True]
    with pytest.raises(skillstore.UsageError) as e:
        skillstore.Namespace.from_yaml("sources:\n  - path: /base\n    lable: x\n")
    assert e.value.kind == "config" and "lable" in str(e.value)


def test_validate_and_parse(tmp_path):
    good = EXAMPLES / "base" / "csv-report"
    bad = tmp_path / "Bad_Name"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: Bad_Name\ndescription: x\n---\n")
    missing = tmp_path / "empty"
    missing.mkdir()
    results = skillstore.validate([good, bad / "SKILL.md", missing])
    assert [r.valid for r in results] == [True, False, False]
    assert results[0].name == "csv-report"
    assert results[1].problems and all(p.severity == "error" for p in results[1].problems)
    assert results[2].problems[0].kind == "missing_skill_md"
    parsed = skillstore.parse_skill_md(b"---\nname: pdf\ndescription: Read PDFs.\n---\n", dir_name="pdf")
    assert parsed.valid and parsed.name == "pdf" and parsed.description == "Read PDFs."
    lenient = skillstore.parse_skill_md(b"---\nname: Pdf_X\ndescription: d\n---\n")
    assert lenient.valid and lenient.problems
    assert not skillstore.parse_skill_md(b"---\nname: Pdf_X\ndescription: d\n---\n", strict=True).valid


def test_async_variants(small_location):
    async def main():
        ns = open_small(small_location, writable=["team"])
        catalog = await ns.aload()
        text, forms, prompt = await asyncio.gather(
            catalog.aread_skill("pdf"),
            catalog.aread_file("pdf", "references/forms.md"),
            catalog.arender_prompt(style="xml"),
        )
        assert text.startswith("---") and forms.startswith(b"Forms") and "<name>pdf</name>" in prompt
        change = await ns.editor().acreate("notes", b"---\nname: notes\ndescription: N.\n---\n")
        assert change.action == "create"
        fresh = await catalog.arefresh()
        assert "notes" in fresh
        with pytest.raises(skillstore.NotFoundError):
            await catalog.aread_skill("nope")
        entries = await ns.als("/team")
        assert "notes" in [e.name for e in entries]

    asyncio.run(main())


def test_memory_mounts_beside_directories(tmp_path):
    ns = skillstore.Namespace(
        mounts={"/base": str(EXAMPLES / "base"), "/team": {"/pdf/SKILL.md": SMALL["/team/pdf/SKILL.md"]}},
        writable=["/team"],
    )
    catalog = ns.load()
    assert catalog["pdf"].source == "team"
    assert catalog["csv-report"].source == "base"
    ns.editor().create("extra", b"---\nname: extra\ndescription: E.\n---\n")
    assert "extra" in ns.load()
    assert not list(Path(tmp_path).iterdir())


def test_dict_mounts_need_no_temporary_directory(tmp_path, monkeypatch):
    # A sandbox with no writable temporary directory can still mount a dict.
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    ns = skillstore.Namespace({"/team/pdf/SKILL.md": SMALL["/team/pdf/SKILL.md"]}, sources=["/team"])
    assert ns.load()["pdf"].source == "team"
    assert not list(Path(tmp_path).iterdir())


def test_a_dict_with_a_path_that_cannot_be_held_is_refused_by_name():
    with pytest.raises(skillstore.SkillstoreError) as caught:
        skillstore.Namespace({"/team/../x/SKILL.md": "---\nname: x\ndescription: X.\n---\n"})
    assert "cannot mount the dict" in str(caught.value)


def test_report_json_is_byte_for_byte_what_show_json_prints():
    """One report in the library: the package and `show --json` give the
    same bytes for every example skill (`SKILLSTORE_BINARY` is the built
    command, set by scripts/test-python.sh)."""
    import os
    import subprocess

    binary = os.environ["SKILLSTORE_BINARY"]
    config = REPO / "skillstore.yaml"
    catalog = skillstore.load_config(config).load()
    names = [skill.name for skill in catalog]
    assert len(names) >= 5
    for name in names:
        shown = subprocess.run(
            [binary, "--config", str(config), "show", "--json", name],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        assert catalog.report_json(name) == shown.stdout, name
