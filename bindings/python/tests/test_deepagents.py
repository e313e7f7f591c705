"""deepagents' own code over `SkillstoreBackend`: the skills middleware
loads exactly what it loads over deepagents' `FilesystemBackend`, and the
file tools of its `FilesystemMiddleware` behave the same for ordinary
paths and refuse the rest with deepagents' error strings."""

from __future__ import annotations

import json
import shutil
import types

import pytest
from deepagents.backends.filesystem import FilesystemBackend
from deepagents.middleware.filesystem import FilesystemMiddleware
from deepagents.middleware.skills import SkillsMiddleware
from langchain.agents.middleware.types import ModelRequest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

import fixture_tree
from conftest import EXAMPLES, upload
from skillstore.deepagents import FastSkillsMiddleware, SkillstoreBackend

SOURCES = ["/base/", "/user/", "/project/", "/team/"]


def load(middleware) -> dict:
    return middleware.before_agent({}, None, None)


def render(middleware, update: dict) -> str:
    request = ModelRequest(
        model=GenericFakeChatModel(messages=iter(())),
        messages=[],
        system_message=None,
        state={"messages": [], **update},
        runtime=None,
    )
    return middleware.modify_request(request).system_message.text


def same_skills(root, backend, sources=SOURCES):
    """The update and prompt of deepagents' middleware over its own
    backend, over `backend`, and of the fast middleware over `backend`."""
    reference = SkillsMiddleware(backend=FilesystemBackend(root_dir=root, virtual_mode=True), sources=sources)
    ours = SkillsMiddleware(backend=backend, sources=sources)
    fast = FastSkillsMiddleware(backend=backend, sources=sources)
    expected = load(reference)
    prompt = render(reference, expected)
    for middleware in (ours, fast):
        got = load(middleware)
        assert got["skills_load_errors"] == expected["skills_load_errors"]
        assert got["skills_metadata"] == expected["skills_metadata"]
        assert render(middleware, got) == prompt
    return expected


@pytest.mark.parametrize("tree", ["tree25", "tree250"])
def test_skills_metadata_equals_deepagents_on_the_fixture_trees(request, tree):
    root, files = request.getfixturevalue(tree)
    update = same_skills(root, SkillstoreBackend(str(root)))
    expected = fixture_tree.expected_result(files)["skills"]
    assert [(s["name"], s["path"]) for s in update["skills_metadata"]] == [(s["name"], s["path"]) for s in expected]


def test_skills_metadata_equals_deepagents_on_the_examples():
    update = same_skills(EXAMPLES, SkillstoreBackend(str(EXAMPLES)))
    assert len(update["skills_metadata"]) >= 5


def test_skills_metadata_equals_deepagents_over_s3(s3_server, tree25):
    root, files = tree25
    location = upload(s3_server, files)
    same_skills(root, SkillstoreBackend(location))


def test_skills_metadata_equals_deepagents_over_mounts(tree25):
    root, _ = tree25
    backend = SkillstoreBackend(mounts={f"/{layer}": str(root / layer) for layer in ("base", "user", "project", "team")})
    same_skills(root, backend)


def test_missing_source_is_rendered_as_deepagents_renders_it(tree25):
    root, _ = tree25
    same_skills(root, SkillstoreBackend(str(root)), sources=["/base/", "/nowhere/", "/team/"])


def test_async_loading_gives_the_same_update(tree25):
    import asyncio

    root, _ = tree25
    backend = SkillstoreBackend(str(root))
    expected = load(SkillsMiddleware(backend=FilesystemBackend(root_dir=root, virtual_mode=True), sources=SOURCES))

    async def main():
        return await asyncio.gather(
            SkillsMiddleware(backend=backend, sources=SOURCES).abefore_agent({}, None, None),
            FastSkillsMiddleware(backend=backend, sources=SOURCES).abefore_agent({}, None, None),
        )

    for got in asyncio.run(main()):
        assert got == expected


# -- integrity --------------------------------------------------------------

LOCKED = {
    "/skills/pdf/SKILL.md": "---\nname: pdf\ndescription: Read PDFs.\n---\nSteps.\n",
    "/skills/pdf/scripts/run.sh": "echo pdf\n",
    "/skills/xls/SKILL.md": "---\nname: xls\ndescription: Read spreadsheets.\n---\nCells.\n",
    "/skills/xls/scripts/run.sh": "echo xls\n",
}


def locked_namespace(root, extra=""):
    import skillstore

    fixture_tree.write_tree(root, LOCKED)
    plain = skillstore.Namespace.from_yaml("sources:\n  - path: /skills/\n", base_dir=root)
    (root / "skillstore.lock").write_text(plain.lock())
    return skillstore.Namespace.from_yaml("sources:\n  - path: /skills/\n" + extra, base_dir=root)


def test_the_middleware_serves_a_locked_namespace_as_deepagents_would(tmp_path):
    """Finding: the middleware named its sources `source0`, ..., so the lock
    (written for the source `skills`) withheld every skill, silently."""
    import asyncio

    ns = locked_namespace(tmp_path, "lock: skillstore.lock\n")
    reference = SkillsMiddleware(backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True), sources=["/skills/"])
    expected = load(reference)
    fast = FastSkillsMiddleware(backend=ns, sources=["/skills/"])
    got = load(fast)
    assert [m["name"] for m in got["skills_metadata"]] == ["pdf", "xls"]
    assert got == expected
    assert render(fast, got) == render(reference, expected)
    assert asyncio.run(fast.abefore_agent({}, None, None)) == expected


def test_the_middleware_says_which_skills_a_lock_withholds(tmp_path, caplog):
    ns = locked_namespace(tmp_path, "lock: skillstore.lock\n")
    (tmp_path / "skills" / "xls" / "scripts" / "run.sh").write_text("echo changed\n")
    fast = FastSkillsMiddleware(backend=ns, sources=["/skills/"])
    with caplog.at_level("WARNING", logger="skillstore.deepagents"):
        got = load(fast)
    assert [m["name"] for m in got["skills_metadata"]] == ["pdf"]
    [error] = got["skills_load_errors"]
    assert "'/skills/xls/SKILL.md'" in error and "lock_mismatch" in error and "'/skills/'" in error
    assert any("lock_mismatch" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    # deepagents shows it to the agent among its load warnings.
    assert "lock_mismatch" in render(fast, got)


def test_the_middleware_applies_the_sources_signature_policy(tmp_path):
    """Under the `source0` names no signature policy matched, so unsigned
    skills of a source requiring signatures were shown."""
    (tmp_path / "allowed_signers").write_text("")
    ns = locked_namespace(tmp_path, "    signatures: {allowed_signers: allowed_signers, required: true}\n")
    got = load(FastSkillsMiddleware(backend=ns, sources=["/skills/"]))
    assert got["skills_metadata"] == []
    assert len(got["skills_load_errors"]) == 2
    assert all("signature_missing" in e for e in got["skills_load_errors"])
    # Under another name the policy would not apply: refused.
    import skillstore

    with pytest.raises(skillstore.UsageError):
        ns.load_sources(["other=/skills/"])


def test_a_deep_agent_over_a_locked_namespace_reads_what_it_is_shown_and_nothing_withheld(tmp_path):
    """The file tools of `SkillstoreBackend` read a locked namespace through
    its check: the skills the middleware shows are read, a withheld one is
    an error per path, never its changed bytes."""
    from deepagents import create_deep_agent
    from langchain_core.messages import AIMessage, ToolMessage

    ns = locked_namespace(tmp_path, "lock: skillstore.lock\n")
    (tmp_path / "skills" / "xls" / "scripts" / "run.sh").write_text("echo EVIL\n")
    backend = SkillstoreBackend(namespace=ns)
    middleware = FastSkillsMiddleware(backend=backend, sources=["/skills/"])
    calls = [
        {"name": "read_file", "args": {"file_path": "/skills/pdf/SKILL.md"}, "id": "call-pdf"},
        {"name": "read_file", "args": {"file_path": "/skills/pdf/scripts/run.sh"}, "id": "call-run"},
        {"name": "read_file", "args": {"file_path": "/skills/xls/scripts/run.sh"}, "id": "call-xls"},
        {"name": "read_file", "args": {"file_path": "/skillstore.lock"}, "id": "call-lock"},
    ]
    model = ScriptedModel(messages=iter([AIMessage(content="", tool_calls=calls), AIMessage(content="Done.")]))
    model.offered = []
    agent = create_deep_agent(model=model, backend=backend, middleware=[middleware])
    result = agent.invoke({"messages": [("user", "Read the PDF skill.")]})
    answers = {m.tool_call_id: m.content for m in result["messages"] if isinstance(m, ToolMessage)}
    assert "Steps." in answers["call-pdf"]
    assert "echo pdf" in answers["call-run"]
    assert "EVIL" not in answers["call-xls"] and "echo xls" not in answers["call-xls"]
    assert "not found" in answers["call-xls"].lower(), answers["call-xls"]
    assert '"digest"' not in answers["call-lock"], answers["call-lock"]
    downloaded = backend.download_files(["/skills/pdf/scripts/run.sh", "/skills/xls/scripts/run.sh"])
    assert downloaded[0].content == b"echo pdf\n" and downloaded[0].error is None
    assert downloaded[1].content is None and downloaded[1].error == "file_not_found"


# -- file tools -------------------------------------------------------------

TREE = {
    "/base/pdf/SKILL.md": "---\nname: pdf\ndescription: Read PDFs.\n---\n# PDF\nUse pdftotext.\nSee forms.\n",
    "/base/pdf/references/forms.md": "Forms\nfill the form\nsubmit the form\n",
    "/base/csv/SKILL.md": "---\nname: csv\ndescription: CSV.\n---\nRows and columns.\n",
    "/team/notes.txt": "one\ntwo\nthree\n",
    "/team/empty.md": "",
}


class Tools:
    """deepagents' file tools over a backend, called as an agent calls them."""

    def __init__(self, backend):
        self.tools = {t.name: t for t in FilesystemMiddleware(backend=backend).tools}
        self.runtime = types.SimpleNamespace(tool_call_id="call-1", state={"messages": []}, config={}, context=None, store=None)

    def __call__(self, name, **args):
        result = self.tools[name].func(runtime=self.runtime, **args)
        return getattr(result, "content", result)


@pytest.fixture
def pair(tmp_path):
    a, b = tmp_path / "reference", tmp_path / "ours"
    fixture_tree.write_tree(a, TREE)
    fixture_tree.write_tree(b, TREE)
    reference = Tools(FilesystemBackend(root_dir=a, virtual_mode=True))
    ours = Tools(SkillstoreBackend(str(b), writable=True))
    return reference, ours, tmp_path


CALLS = [
    ("ls", {"path": "/"}),
    ("ls", {"path": "/base"}),
    ("ls", {"path": "/base/pdf/"}),
    ("ls", {"path": "/nowhere"}),
    ("ls", {"path": "/team/notes.txt"}),
    ("read_file", {"file_path": "/base/pdf/SKILL.md"}),
    ("read_file", {"file_path": "/team/notes.txt", "offset": 1, "limit": 1}),
    ("read_file", {"file_path": "/team/empty.md"}),
    ("read_file", {"file_path": "/base/none.md"}),
    ("read_file", {"file_path": "/base/pdf"}),
    ("glob", {"pattern": "*.md"}),
    ("glob", {"pattern": "**/*.md", "path": "/base"}),
    ("glob", {"pattern": "*.txt", "path": "/team"}),
    ("glob", {"pattern": "*.zzz"}),
    ("grep", {"pattern": "form"}),
    ("grep", {"pattern": "form", "glob": "*.md", "output_mode": "content"}),
    ("grep", {"pattern": "two", "path": "/team", "output_mode": "count"}),
    ("grep", {"pattern": "absent"}),
    ("write_file", {"file_path": "/team/new.md", "content": "fresh\n"}),
    ("read_file", {"file_path": "/team/new.md"}),
    ("write_file", {"file_path": "/team/notes.txt", "content": "replaced\n"}),
    ("read_file", {"file_path": "/team/notes.txt"}),
    ("edit_file", {"file_path": "/base/pdf/references/forms.md", "old_string": "fill", "new_string": "complete"}),
    ("edit_file", {"file_path": "/base/pdf/references/forms.md", "old_string": "the form", "new_string": "it"}),
    ("edit_file", {"file_path": "/base/pdf/references/forms.md", "old_string": "the form", "new_string": "it", "replace_all": True}),
    ("edit_file", {"file_path": "/base/pdf/references/forms.md", "old_string": "absent", "new_string": "x"}),
    ("edit_file", {"file_path": "/base/missing.md", "old_string": "a", "new_string": "b"}),
    ("read_file", {"file_path": "/base/pdf/references/forms.md"}),
    ("ls", {"path": "/team"}),
    ("read_file", {"file_path": "/base/../team/notes.txt"}),
    ("ls", {"path": "/../"}),
    ("write_file", {"file_path": "/team/../../escape.md", "content": "x"}),
    ("edit_file", {"file_path": "../x", "old_string": "a", "new_string": "b"}),
    ("glob", {"pattern": "../*"}),
    ("grep", {"pattern": "x", "path": "/../"}),
]


def strip_times(text):
    import re

    return re.sub(r"'modified_at': '[^']*', ?", "", str(text))


@pytest.mark.parametrize(("name", "args"), CALLS, ids=[f"{i}-{c[0]}" for i, c in enumerate(CALLS)])
def test_file_tools_behave_as_on_deepagents_own_backend(pair, name, args):
    reference, ours, tmp_path = pair
    # Each call runs after every earlier one, on both sides.
    index = CALLS.index((name, args))
    for earlier_name, earlier_args in CALLS[:index]:
        reference(earlier_name, **earlier_args)
        ours(earlier_name, **earlier_args)
    expected = strip_times(reference(name, **args))
    got = strip_times(ours(name, **args))
    assert got == expected
    assert str(tmp_path) not in got


def test_links_out_are_refused_without_crashing(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("the secret\n")
    root = tmp_path / "root"
    fixture_tree.write_tree(root, TREE)
    (root / "base" / "leak.md").symlink_to(outside / "secret.md")
    (root / "base" / "leakdir").symlink_to(outside)
    tools = Tools(SkillstoreBackend(str(root), writable=True))
    for name, args in [
        ("read_file", {"file_path": "/base/leak.md"}),
        ("read_file", {"file_path": "/base/leakdir/secret.md"}),
        ("ls", {"path": "/base/leakdir"}),
        ("edit_file", {"file_path": "/base/leak.md", "old_string": "secret", "new_string": "x"}),
        ("write_file", {"file_path": "/base/leakdir/new.md", "content": "x"}),
        ("grep", {"pattern": "secret"}),
        ("glob", {"pattern": "**/secret.md"}),
    ]:
        out = str(tools(name, **args))
        assert "the secret" not in out, (name, out)
        assert str(tmp_path) not in out, (name, out)
        if name in ("read_file", "edit_file", "write_file", "ls"):
            assert out.startswith("Error"), (name, out)
    assert (outside / "secret.md").read_text() == "the secret\n"
    assert not (outside / "new.md").exists()
    listing = str(tools("ls", path="/base"))
    assert "leak" not in listing


def test_oversized_files_are_refused_with_an_error_string(tmp_path):
    fixture_tree.write_tree(tmp_path, {**TREE, "/base/big.md": "x" * 5000})
    tools = Tools(SkillstoreBackend(str(tmp_path), max_file_bytes=4096, writable=True))
    out = tools("read_file", file_path="/base/big.md")
    assert out.startswith("Error: Error reading file '/base/big.md': ") and "too large" in out
    out = tools("edit_file", file_path="/base/big.md", old_string="x", new_string="y", replace_all=True)
    assert out.startswith("Error editing file '/base/big.md': ") and "too large" in out
    assert tools("read_file", file_path="/base/pdf/SKILL.md").count("PDF") >= 1


def test_writes_outside_writable_mounts_get_the_permission_error(tmp_path):
    fixture_tree.write_tree(tmp_path, TREE)
    backend = SkillstoreBackend(mounts={"/base": str(tmp_path / "base"), "/team": str(tmp_path / "team")}, writable=["/team"])
    tools = Tools(backend)
    assert tools("write_file", file_path="/base/x.md", content="x") == "Error: permission denied for write on /base/x.md"
    assert (
        tools("edit_file", file_path="/base/csv/SKILL.md", old_string="CSV.", new_string="x")
        == "Error: permission denied for write on /base/csv/SKILL.md"
    )
    assert backend.delete("/base/csv/SKILL.md").error == "Error: permission denied for write on /base/csv/SKILL.md"
    assert [r.error for r in backend.upload_files([("/base/y.md", b"y"), ("/team/y.md", b"y")])] == ["permission_denied", None]
    assert tools("write_file", file_path="/team/ok.md", content="ok") == "Updated file /team/ok.md"
    assert (tmp_path / "team" / "ok.md").read_text() == "ok"
    assert not (tmp_path / "base" / "x.md").exists()


def test_download_and_delete_as_the_protocol_says(tmp_path):
    fixture_tree.write_tree(tmp_path, TREE)
    backend = SkillstoreBackend(str(tmp_path), writable=True)
    got = backend.download_files(["/base/csv/SKILL.md", "/base/none", "/base/pdf", "/../etc/passwd"])
    assert got[0].content == TREE["/base/csv/SKILL.md"].encode() and got[0].error is None
    assert [r.error for r in got[1:]] == ["file_not_found", "is_directory", "invalid_path"]
    assert backend.delete("/base/pdf").path == "/base/pdf"
    assert not (tmp_path / "base" / "pdf" / "SKILL.md").exists()
    assert backend.delete("/base/pdf/SKILL.md").error == "Error: '/base/pdf/SKILL.md' not found"


def test_a_skill_copied_in_from_the_file_tools_appears(tmp_path):
    shutil.copytree(EXAMPLES, tmp_path / "skills")
    backend = SkillstoreBackend(mounts={"/skills": str(tmp_path / "skills")}, writable=True)
    tools = Tools(backend)
    tools("write_file", file_path="/skills/team/new-one/SKILL.md", content="---\nname: new-one\ndescription: New.\n---\n")
    update = load(FastSkillsMiddleware(backend=backend, sources=["/skills/base/", "/skills/team/"]))
    assert "new-one" in [s["name"] for s in update["skills_metadata"]]


# -- the search tool ----------------------------------------------------------


class ScriptedModel(GenericFakeChatModel):
    """A chat model answering with the scripted messages in turn, and
    recording the names of the tools each call offered it."""

    offered: list = []

    def bind_tools(self, tools, **kwargs):
        from langchain_core.utils.function_calling import convert_to_openai_tool

        self.offered.append([convert_to_openai_tool(t)["function"]["name"] for t in tools])
        return self


SEARCHED = {
    "/skills/base/pdf/SKILL.md": "---\nname: pdf\ndescription: Read PDF files.\n---\n# PDF\nUse pdftotext.\n",
    "/skills/base/csv/SKILL.md": "---\nname: csv\ndescription: Read CSV files.\n---\nRows and columns.\n",
    "/skills/team/invoice/SKILL.md": (
        "---\nname: invoice\ndescription: Fill invoice forms.\n---\n# Invoices\nTotals, taxes and the VAT number.\n"
    ),
    "/skills/team/legacy/SKILL.md": "---\nname: legacy\ndescription: The old invoice scripts.\n---\nInvoice taxes, the old way.\n",
}


def scripted_agent(tmp_path, messages, *, search=True):
    from deepagents import create_deep_agent

    fixture_tree.write_tree(tmp_path, SEARCHED)
    backend = SkillstoreBackend(str(tmp_path))
    middleware = FastSkillsMiddleware(backend=backend, sources=["/skills/base/", "/skills/team/"], search=search)
    model = ScriptedModel(messages=iter(messages))
    model.offered = []
    agent = create_deep_agent(model=model, backend=backend, middleware=[middleware])
    return agent, model


def test_a_deep_agent_finds_a_skill_with_the_search_tool_and_reads_it(tmp_path):
    from langchain_core.messages import AIMessage, ToolMessage

    query = {"name": "search_skills", "args": {"query": "invoice taxes", "limit": 1}, "id": "call-search"}
    read = {"name": "read_file", "args": {"file_path": "/skills/team/invoice/SKILL.md"}, "id": "call-read"}
    agent, model = scripted_agent(
        tmp_path,
        [AIMessage(content="", tool_calls=[query]), AIMessage(content="", tool_calls=[read]), AIMessage(content="Done.")],
    )
    result = agent.invoke({"messages": [("user", "Fill in this invoice.")]})
    assert all("search_skills" in names for names in model.offered), model.offered
    tool_messages = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    found = tool_messages["call-search"]
    assert found.name == "search_skills" and found.status == "success", found
    results = json.loads(found.content)
    assert results == [
        {
            "name": "invoice",
            "description": "Fill invoice forms.",
            "path": "/skills/team/invoice/SKILL.md",
            "score": pytest.approx(results[0]["score"]),
        }
    ]
    assert results[0]["score"] > 0
    assert "Totals, taxes and the VAT number." in tool_messages["call-read"].content
    assert result["messages"][-1].content == "Done."


def test_the_search_tool_is_offered_only_when_asked(tmp_path):
    from langchain_core.messages import AIMessage

    agent, model = scripted_agent(tmp_path, [AIMessage(content="Done.")], search=False)
    agent.invoke({"messages": [("user", "Hello.")]})
    assert model.offered and all("search_skills" not in names for names in model.offered)
    assert "read_file" in model.offered[0]


def test_the_search_tool_sees_skills_added_since_and_keeps_within_its_limit(tmp_path):
    fixture_tree.write_tree(tmp_path, SEARCHED)
    middleware = FastSkillsMiddleware(
        backend=SkillstoreBackend(str(tmp_path)), sources=["/skills/base/", "/skills/team/"], search=True
    )
    (tool,) = middleware.tools
    assert tool.name == "search_skills"
    def names(args):
        return [r["name"] for r in json.loads(tool.invoke(args))]

    assert names({"query": "invoice"}) == ["invoice", "legacy"]
    assert tool.invoke({"query": "nothing matches this"}) == "[]"
    fixture_tree.write_tree(
        tmp_path, {"/skills/team/receipts/SKILL.md": "---\nname: receipts\ndescription: File expense receipts.\n---\n"}
    )
    assert names({"query": "expense receipts"}) == ["receipts"]
    assert len(names({"query": "read files invoice", "limit": 1})) == 1
    assert len(names({"query": "read files invoice", "limit": 0})) == 1
    assert len(names({"query": "read files invoice", "limit": 10_000})) == 5


def test_the_search_tool_works_on_the_event_loop(tmp_path):
    import asyncio

    fixture_tree.write_tree(tmp_path, SEARCHED)
    middleware = FastSkillsMiddleware(
        backend=SkillstoreBackend(str(tmp_path)), sources=["/skills/base/", "/skills/team/"], search=True
    )
    got = json.loads(asyncio.run(middleware.tools[0].ainvoke({"query": "csv rows"})))
    assert got[0]["name"] == "csv" and got[0]["path"] == "/skills/base/csv/SKILL.md"
