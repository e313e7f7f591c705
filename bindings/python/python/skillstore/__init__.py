"""Store, layer and serve Agent Skills from a directory, memory or S3.

The work is done by the Rust library ``skillstore``; this package exposes it
to Python. Blocking calls release the GIL; the ``a``-prefixed methods return awaitables
that run them on the event loop's executor so the asyncio event loop never blocks.
"""

from __future__ import annotations

from ._native import (
    Blob,
    Catalog,
    Change,
    ConflictError,
    Diagnostic,
    Entry,
    GrepReport,
    InvalidSkillError,
    Namespace,
    NotFoundError,
    Problem,
    ReadOnlyError,
    RefusedPathError,
    SearchResult,
    Shadowed,
    Skill,
    SkillEditor,
    SkillstoreError,
    Source,
    TooLargeError,
    UnavailableError,
    UsageError,
    Validation,
    load_config,
    parse_skill_md,
    validate,
)

__all__ = [
    "Blob",
    "Catalog",
    "Change",
    "ConflictError",
    "Diagnostic",
    "Entry",
    "GrepReport",
    "InvalidSkillError",
    "Namespace",
    "NotFoundError",
    "Problem",
    "ReadOnlyError",
    "RefusedPathError",
    "SearchResult",
    "Shadowed",
    "Skill",
    "SkillEditor",
    "SkillstoreError",
    "Source",
    "TooLargeError",
    "UnavailableError",
    "UsageError",
    "Validation",
    "load_config",
    "parse_skill_md",
    "validate",
]
