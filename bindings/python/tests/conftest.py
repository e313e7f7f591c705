"""Shared fixtures: generated skill trees, the repository's example skills,
and an in-process S3 server with the `AWS_*` settings pointing at it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import fixture_tree  # noqa: E402
import skillstore  # noqa: E402
from skillstore._native import testkit  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "skills"
LAYERS = ("base", "user", "project", "team")

SMALL = {
    "/base/pdf/SKILL.md": "---\nname: pdf\ndescription: Read PDFs.\nlicense: MIT\n---\n# PDF\nSteps.\n",
    "/base/pdf/references/forms.md": "Forms, the base way.\n",
    "/base/csv/SKILL.md": "---\nname: csv\ndescription: Read CSV files.\nallowed-tools: Read Grep\n---\nBody\n",
    "/team/pdf/SKILL.md": (
        "---\nname: pdf\ndescription: Read PDFs, the team's way.\ncompatibility: python3\n"
        "metadata:\n  owner: team\n  version: 2\n---\n# PDF (team)\n"
    ),
    "/team/pdf/references/forms.md": "Forms, the team's way.\n",
    "/team/broken/SKILL.md": "no frontmatter here\n",
}


@pytest.fixture(scope="session")
def s3_server():
    """One S3 server for the session; its `AWS_*` settings are in the
    environment while tests run."""
    server = testkit.S3Server()
    saved = {k: os.environ.get(k) for k, _ in server.env()}
    os.environ.update(dict(server.env()))
    yield server
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def upload(server, files: dict[str, str]) -> str:
    """A new bucket holding `files`; returns its `s3://` location."""
    bucket = server.create_bucket()
    location = f"s3://{bucket}"
    ns = skillstore.Namespace(location, writable=["/"])
    for path, content in files.items():
        ns.write(path, content.encode())
    return location


@pytest.fixture(params=["dir", "memory", "s3"])
def small_location(request, tmp_path):
    """The SMALL tree at `/`, as a directory, in memory, or in S3."""
    kind = request.param
    if kind == "dir":
        fixture_tree.write_tree(tmp_path, SMALL)
        return str(tmp_path)
    if kind == "memory":
        return dict(SMALL)
    return upload(request.getfixturevalue("s3_server"), SMALL)


@pytest.fixture(scope="session")
def tree25(tmp_path_factory):
    """The 25-per-layer generated tree: (directory, files)."""
    files = fixture_tree.tree(25)
    root = tmp_path_factory.mktemp("tree25")
    fixture_tree.write_tree(root, files)
    return root, files


@pytest.fixture(scope="session")
def tree250(tmp_path_factory):
    """The 250-per-layer generated tree: (directory, files)."""
    files = fixture_tree.tree(250)
    root = tmp_path_factory.mktemp("tree250")
    fixture_tree.write_tree(root, files)
    return root, files
