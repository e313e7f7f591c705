"""Full-text search from Python: `Namespace.search` (the command's index,
in the local cache), `Catalog.search` (an index in memory), and the search
tool of `FastSkillsMiddleware` called by a deepagents agent."""

from __future__ import annotations

import asyncio
import json

import pytest

import fixture_tree
import skillstore

SEARCH_TREE = {
    "/base/pdf/SKILL.md": (
        "---\nname: pdf\ndescription: Read PDF files.\n---\n# PDF\nThe zebracorn way of reading a PDF, from the base.\n"
    ),
    "/base/csv/SKILL.md": "---\nname: csv\ndescription: Read CSV files and spreadsheets.\n---\n# Columns\nRows and columns.\n",
    "/base/release-notes/SKILL.md": (
        "---\nname: release-notes\ndescription: Write release notes from the git log.\n---\n"
        "# Changelog\nGroup the commits since the last tag by kind.\n"
    ),
    "/base/legacy-deploy/SKILL.md": (
        "---\nname: legacy-deploy\ndescription: Deploy with the old kubernetes scripts.\n---\n# Kubernetes\nkubectl apply.\n"
    ),
    "/team/pdf/SKILL.md": "---\nname: pdf\ndescription: Read PDF files, the team's way.\n---\n# PDF\nUse pdftotext.\n",
    "/team/invoice/SKILL.md": (
        "---\nname: invoice\ndescription: Fill invoice forms.\n---\n# Invoices\nTotals, taxes and the PDF form.\n"
    ),
}

CONFIG = """\
mounts:
  - at: /
    location: .
sources:
  - path: /base
  - path: /team
skills:
  disabled: [legacy-deploy]
"""


@pytest.fixture
def namespace(tmp_path, monkeypatch):
    """The search tree in a directory, opened through a configuration that
    disables `legacy-deploy`; the local cache under the test's directory."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    fixture_tree.write_tree(tmp_path / "tree", SEARCH_TREE)
    return skillstore.Namespace.from_yaml(CONFIG, base_dir=tmp_path / "tree")


@pytest.fixture(params=["namespace", "catalog"])
def search(request, namespace):
    """`search(query, ...)` through `Namespace.search` or `Catalog.search`."""
    if request.param == "namespace":
        return namespace.search
    return namespace.load().search


def test_the_intended_skill_ranks_first(search):
    assert search("write release notes from git commits")[0].name == "release-notes"
    assert search("spreadsheet columns")[0].name == "csv"
    assert search("invoice taxes")[0].name == "invoice"
    first = search("kubernetes", include_disabled=True)[0]
    assert (first.name, first.enabled) == ("legacy-deploy", False)


def test_results_carry_the_fields_of_search_json(search):
    hit = search("invoice")[0]
    assert isinstance(hit, skillstore.SearchResult)
    assert (hit.name, hit.description, hit.source, hit.path) == (
        "invoice",
        "Fill invoice forms.",
        "team",
        "/team/invoice/SKILL.md",
    )
    assert hit.score > 0
    assert hit.enabled is True
    d = hit.to_dict()
    assert list(d) == ["name", "description", "source", "path", "score"]
    assert d["score"] == hit.score
    json.dumps(d)


def test_limit_is_respected_and_results_are_best_first(search):
    everything = search("read write fill deploy pdf csv git kubernetes", limit=1000, include_disabled=True)
    assert len(everything) == 5
    assert [h.score for h in everything] == sorted((h.score for h in everything), reverse=True)
    enabled = [h for h in search("read write fill deploy pdf csv git kubernetes", limit=1000)]
    assert enabled == [h for h in everything if h.enabled]
    assert search("read write fill deploy pdf csv git kubernetes", limit=2) == enabled[:2]
    assert len(search("pdf", limit=1)) == 1


def test_a_shadowed_skill_is_never_a_result(search):
    # Only the base `pdf`, which the team's overrides, holds this word.
    assert search("zebracorn") == []
    pdf = [h for h in search("pdf", limit=1000, include_disabled=True) if h.name == "pdf"]
    assert [(h.source, h.path) for h in pdf] == [("team", "/team/pdf/SKILL.md")]


def test_a_disabled_skill_only_when_asked(search):
    assert [h.name for h in search("kubernetes")] == []
    assert [h.name for h in search("kubernetes", include_disabled=True)] == ["legacy-deploy"]


def test_a_query_without_words_has_no_results(search):
    assert search("") == []
    assert search("   ?! ") == []


@pytest.mark.parametrize("limit", [0, -1, 1001])
def test_a_limit_out_of_range_is_a_usage_error(search, limit):
    with pytest.raises(skillstore.UsageError) as e:
        search("pdf", limit=limit)
    assert e.value.kind == "usage"
    assert "limit" in str(e.value)


def test_a_query_that_is_not_text_is_a_type_error(search):
    with pytest.raises(TypeError):
        search(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        search(None)  # type: ignore[arg-type]


def test_namespace_search_keeps_the_commands_index_in_the_local_cache(namespace, tmp_path):
    namespace.search("invoice")
    indexes = list((tmp_path / "cache" / "skillstore").glob("search-*"))
    assert len(indexes) == 1, list((tmp_path / "cache").rglob("*"))


def test_namespace_search_sees_a_change_made_since(namespace, tmp_path):
    assert namespace.search("zebracorn") == []
    (tmp_path / "tree" / "team" / "pdf" / "SKILL.md").write_text(
        "---\nname: pdf\ndescription: Read PDF files, the team's way.\n---\nNow the zebracorn way too.\n"
    )
    assert [h.path for h in namespace.search("zebracorn")] == ["/team/pdf/SKILL.md"]


def test_a_refreshed_catalog_searches_its_own_skills(namespace, tmp_path):
    catalog = namespace.load()
    assert catalog.search("zebracorn") == []
    (tmp_path / "tree" / "team" / "pdf" / "SKILL.md").unlink()
    (tmp_path / "tree" / "team" / "pdf").rmdir()
    refreshed = catalog.refresh()
    assert [h.path for h in refreshed.search("zebracorn")] == ["/base/pdf/SKILL.md"]
    # The older catalog still answers with its own winners only: never the
    # base's `pdf`, which its team `pdf` shadows.
    assert catalog.search("zebracorn") == []
    assert all(h.path != "/base/pdf/SKILL.md" for h in catalog.search("pdf"))
    assert [h.path for h in refreshed.search("zebracorn")] == ["/base/pdf/SKILL.md"]


def test_search_on_memory_mounts(tmp_path):
    ns = skillstore.Namespace(dict(SEARCH_TREE), sources=["/base", "/team"])
    assert ns.search("spreadsheet")[0].name == "csv"


def test_awaitable_search(namespace):
    async def main():
        catalog = await namespace.aload()
        return await asyncio.gather(namespace.asearch("invoice"), catalog.asearch("invoice", 1))

    by_namespace, by_catalog = asyncio.run(main())
    assert by_namespace[0].name == by_catalog[0].name == "invoice"
    assert len(by_catalog) == 1
