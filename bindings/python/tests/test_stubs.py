"""The type stubs name every public method and property of the extension's
classes, and nothing it does not have."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from skillstore import _native

STUBS = Path(_native.__file__).with_name("_native.pyi")
if not STUBS.exists():
    STUBS = Path(__file__).resolve().parents[1] / "python" / "skillstore" / "_native.pyi"


def stubbed_classes() -> dict[str, set[str]]:
    tree = ast.parse(STUBS.read_text())
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = {
                item.name
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not item.name.startswith("_")
            } | {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
    return classes


STUBBED = stubbed_classes()


@pytest.mark.parametrize("name", sorted(n for n in STUBBED if not n.endswith("Error")))
def test_a_class_has_exactly_the_stubbed_members(name):
    cls = getattr(_native, name)
    public = {m for m in dir(cls) if not m.startswith("_")}
    assert STUBBED[name] == public
