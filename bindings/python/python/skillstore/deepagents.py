"""deepagents integration: a `BackendProtocol` over a skillstore namespace,
and a drop-in `SkillsMiddleware` whose catalog comes from one Rust call.

Needs the optional dependency ``deepagents`` (``pip install
skillstore[deepagents]``); ``import skillstore`` never does.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepagents.backends.protocol import (
    FILE_NOT_FOUND,
    INVALID_PATH,
    IS_DIRECTORY,
    PERMISSION_DENIED,
    BackendProtocol,
    DeleteResult,
    EditResult,
    FileDownloadResponse,
    FileInfo,
    FileUploadResponse,
    GlobResult,
    GlobTruncationReason,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.utils import (
    InvalidGlobPatternError,
    _get_backend_read_file_type,
    _glob_search_files,
    check_empty_content,
    perform_string_replacement,
    slice_read_response,
)
from deepagents.middleware.skills import SkillsMiddleware
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool

from ._native import (
    Blob,
    Catalog,
    Namespace,
    NotFoundError,
    ReadOnlyError,
    RefusedPathError,
    SkillstoreError,
    TooLargeError,
)

__all__ = [
    "DEFAULT_MAX_GREP_BYTES",
    "DEFAULT_MAX_RESULTS",
    "DEFAULT_MAX_WALK",
    "SEARCH_TOOL_MAX_LIMIT",
    "SEARCH_TOOL_NAME",
    "FastSkillsMiddleware",
    "SkillstoreBackend",
    "SkillstoreGlobResult",
    "SkillstoreGrepResult",
    "SkillstoreLsResult",
]

DEFAULT_MAX_RESULTS = 1000
"""The most entries `SkillstoreBackend.ls`, files `glob` and matches `grep`
return unless `max_results` says otherwise."""

DEFAULT_MAX_WALK = 10_000
"""The most files and directories one `glob` or `grep` walks below its path
unless `max_walk` says otherwise."""

DEFAULT_MAX_GREP_BYTES = 256 * 1024 * 1024
"""The most bytes one `grep` reads (256 MiB) unless `max_grep_bytes` says
otherwise: the file that crosses it is the last one read."""

_MISSING = ("not_found", "skill_not_found", "source_not_found")

logger = logging.getLogger(__name__)


def _vpath(path: str | None) -> str:
    """A protocol path as a virtual path: absolute, without a trailing `/`.
    Nothing is normalized away: `..`, `.` and empty segments stay, so the
    namespace refuses them."""
    path = path or "/"
    if not path.startswith("/"):
        path = "/" + path
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    return path


def _permission_error(operation: str, path: str) -> str:
    return f"Error: permission denied for {operation} on {path}"


def _upload_error(error: SkillstoreError) -> str:
    kind = getattr(error, "kind", "")
    if isinstance(error, ReadOnlyError):
        return PERMISSION_DENIED
    if kind in _MISSING:
        return FILE_NOT_FOUND
    if kind == "is_a_directory":
        return IS_DIRECTORY
    if isinstance(error, RefusedPathError):
        return INVALID_PATH
    return str(error)


@dataclass
class SkillstoreLsResult(LsResult):
    """deepagents' `LsResult`, saying whether the listing was cut short.

    `truncated` is True when the directory holds more entries than
    `max_results` (the first by name are listed); `truncation_reason` is
    then `"budget"` and `limit` names the setting that cut it."""

    truncated: bool = False
    truncation_reason: GlobTruncationReason | None = None
    limit: str | None = None


@dataclass
class SkillstoreGlobResult(GlobResult):
    """deepagents' `GlobResult`; when `truncated`, `truncation_reason` is
    `"budget"` and `limit` names the setting that cut it: `max_results` (more
    files matched) or `max_walk` (more files were below the path)."""

    limit: str | None = None


@dataclass
class SkillstoreGrepResult(GrepResult):
    """deepagents' `GrepResult`; when `truncated`, `truncation_reason` is
    `"budget"` and `limit` names the setting that cut it: `max_count` or
    `max_results` (more lines matched), `max_grep_bytes` (the search read its
    budget with files left) or `max_walk` (more files were below the path)."""

    truncation_reason: GlobTruncationReason | None = None
    limit: str | None = None


class SkillstoreBackend(BackendProtocol):
    """deepagents' `BackendProtocol` over a skillstore namespace.

    `SkillstoreBackend("DIR")` or `SkillstoreBackend("s3://bucket/prefix")`
    mounts that location at `/`; `SkillstoreBackend(mounts={"/base": ...,
    "/team": ...})` mounts several (a location, or a dict `{path: content}`
    held in memory); `SkillstoreBackend(namespace=load_config(...))` uses a
    configured namespace. Every read goes through the namespace's guards
    (no `..`, symlinks judged by the mount's policy, reads refused above
    `max_file_bytes`), and failures come back as deepagents' results, never
    as exceptions. Writes go only to writable mounts (`writable=True` for
    every mount, or the mount points that may be written); elsewhere they
    fail with deepagents' permission error.

    Listings and searches are bounded: `ls`, `glob` and `grep` return at
    most `max_results` entries, files or matches; `glob` and `grep` walk at
    most `max_walk` files and directories below their path; `grep` reads
    the files one batch at a time (one file at a time under the default
    read limit), at most `max_grep_bytes` in all, and returns each matching
    line cut to 2,000 characters. A result cut short says so (`truncated`,
    `truncation_reason`, and `limit`, the setting that cut it). No listing,
    search or read names a path that no skill may offer (the library's
    content rule: `.skillstore/` other than the signature, and what the
    rule adds).
    """

    def __init__(
        self,
        location: str | os.PathLike[str] | Mapping[str, str | bytes] | None = None,
        *,
        mounts: Mapping[str, Any] | None = None,
        writable: bool | Sequence[str] = False,
        namespace: Namespace | None = None,
        max_file_bytes: int | None = None,
        symlinks: str | None = None,
        max_results: int = DEFAULT_MAX_RESULTS,
        max_walk: int = DEFAULT_MAX_WALK,
        max_grep_bytes: int = DEFAULT_MAX_GREP_BYTES,
    ) -> None:
        for name, value in (("max_results", max_results), ("max_walk", max_walk), ("max_grep_bytes", max_grep_bytes)):
            if int(value) < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        self.max_results = int(max_results)
        self.max_walk = int(max_walk)
        self.max_grep_bytes = int(max_grep_bytes)
        if namespace is not None:
            if location is not None or mounts is not None:
                raise ValueError("pass either a namespace or locations, not both")
            self.namespace = namespace
            return
        points: dict[str, Any] = {}
        if location is not None:
            points["/"] = location
        points.update(mounts or {})
        if not points:
            raise ValueError("SkillstoreBackend needs a location, mounts or a namespace")
        if writable is True:
            wanted = set(points)
        elif writable is False:
            wanted = set()
        else:
            wanted = {_vpath(w) for w in writable}
        # Each mount is a source of its own (read-only ones first, since the
        # lowest-priority source of several cannot be writable).
        order = sorted(points, key=lambda at: _vpath(at) in wanted)
        specs = [f"mount{i}={at}" for i, at in enumerate(order)]
        self.namespace = Namespace(
            mounts={at: points[at] for at in order},
            sources=specs,
            writable=[_vpath(at) for at in order if _vpath(at) in wanted],
            max_file_bytes=max_file_bytes,
            symlinks=symlinks,
        )

    # -- listing -----------------------------------------------------------

    def ls(self, path: str) -> LsResult:
        """The entries directly in `path`: directories end in `/`; at most
        `max_results`, the first by name (`truncated` then says so)."""
        try:
            entries = self.namespace.ls(_vpath(path), max_entries=self.max_results + 1)
        except SkillstoreError as e:
            if e.kind in _MISSING:
                return SkillstoreLsResult(error=f"Path '{path}': path_not_found")
            if e.kind == "not_a_directory":
                return SkillstoreLsResult(error=f"Path '{path}': not_a_directory")
            return SkillstoreLsResult(error=f"Cannot list '{path}': {e}")
        truncated = len(entries) > self.max_results
        infos: list[FileInfo] = []
        for entry in entries[: self.max_results]:
            if entry.kind == "dir":
                infos.append({"path": entry.path + "/", "is_dir": True, "size": 0})
            elif entry.kind == "file":
                info: FileInfo = {"path": entry.path, "is_dir": False}
                if entry.size is not None:
                    info["size"] = entry.size
                infos.append(info)
        infos.sort(key=lambda x: x["path"])
        if truncated:
            return SkillstoreLsResult(entries=infos, truncated=True, truncation_reason="budget", limit="max_results")
        return SkillstoreLsResult(entries=infos)

    # -- reading -----------------------------------------------------------

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """A window of a text file's lines, or a binary file as base64."""
        try:
            data = self.namespace.read(_vpath(file_path)).data
        except SkillstoreError as e:
            if e.kind in _MISSING or e.kind in ("is_a_directory", "not_a_directory"):
                return ReadResult(error=f"File '{file_path}' not found")
            return ReadResult(error=f"Error reading file '{file_path}': {e}")
        if _get_backend_read_file_type(file_path) != "text":
            return ReadResult(file_data={"content": base64.standard_b64encode(data).decode("ascii"), "encoding": "base64"})
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError as e:
            return ReadResult(error=f"Error reading file '{file_path}': {e}")
        # Universal newlines, as a text-mode read gives.
        content = content.replace("\r\n", "\n").replace("\r", "\n")
        empty = check_empty_content(content)
        if empty:
            return ReadResult(file_data={"content": empty, "encoding": "utf-8"})
        return slice_read_response({"content": content, "encoding": "utf-8"}, offset, limit)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Every path read concurrently in one call; failures per path."""
        results = self.namespace.read_many([_vpath(p) for p in paths])
        responses = []
        for path, result in zip(paths, results, strict=True):
            if isinstance(result, Blob):
                responses.append(FileDownloadResponse(path=path, content=result.data))
            else:
                responses.append(FileDownloadResponse(path=path, error=_upload_error(result)))
        return responses

    # -- searching ---------------------------------------------------------

    def _files_under(self, path: str | None) -> tuple[dict[str, Any], bool]:
        """The files below `path` (or the file at it) with their sizes, and
        True when the walk stopped at `max_walk` with more below."""
        root = _vpath(path)
        try:
            entry = self.namespace.stat(root)
            if entry.kind == "file":
                return {entry.path: {"size": entry.size or 0}}, False
            walked, cut = self.namespace.walk(root, max_entries=self.max_walk)
        except SkillstoreError:
            return {}, False
        return {e.path: {"size": e.size or 0} for e in walked if e.kind == "file"}, cut

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Files below `path` matching `pattern` (deepagents' glob rules),
        sorted by path: at most `max_results` of those among the first
        `max_walk` entries below `path` (`truncated` says when more may
        exist)."""
        files, cut = self._files_under(path)
        try:
            found = _glob_search_files(files, pattern, path)
        except InvalidGlobPatternError as e:
            return SkillstoreGlobResult(error=str(e))
        if found == "No files found":
            found = ""
        matches: list[FileInfo] = [{"path": p, "is_dir": False, "size": files[p]["size"]} for p in found.split("\n") if p]
        matches.sort(key=lambda x: x["path"])
        limit = None
        if len(matches) > self.max_results:
            matches, limit = matches[: self.max_results], "max_results"
        elif cut:
            limit = "max_walk"
        if limit is None:
            return SkillstoreGlobResult(matches=matches)
        return SkillstoreGlobResult(matches=matches, truncated=True, truncation_reason="budget", limit=limit)

    def grep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """Lines holding the literal `pattern` in text files below `path`,
        by file path then line: at most `max_count` (or `max_results`)
        matches, each line cut to 2,000 characters. Files are read one
        batch at a time and let go (`Namespace.grep`), at most
        `max_grep_bytes` in all, among the first `max_walk` entries below
        `path`; `truncated` says when more may exist. Files over the read
        limit, unreadable or not UTF-8 are skipped."""
        files, cut = self._files_under(path)
        if glob:
            try:
                matching = _glob_search_files(files, glob, path)
            except InvalidGlobPatternError as e:
                return SkillstoreGrepResult(error=str(e))
            names = [] if matching == "No files found" else matching.split("\n")
        else:
            names = list(files)
        names.sort()
        del files
        cap, cap_name = self.max_results, "max_results"
        if max_count is not None and max(int(max_count), 0) < cap:
            cap, cap_name = max(int(max_count), 0), "max_count"
        report = self.namespace.grep(pattern, names, max_matches=cap, max_bytes=self.max_grep_bytes)
        matches: list[GrepMatch] = [{"path": p, "line": n, "text": t} for p, n, t in report.matches]
        limit = None
        if report.reason == "max_matches":
            limit = cap_name
        elif report.reason == "max_bytes":
            limit = "max_grep_bytes"
        elif cut:
            limit = "max_walk"
        if limit is None:
            return SkillstoreGrepResult(matches=matches)
        return SkillstoreGrepResult(matches=matches, truncated=True, truncation_reason="budget", limit=limit)

    # -- writing -----------------------------------------------------------

    def write(self, file_path: str, content: str) -> WriteResult:
        """Creates or replaces a file in a writable mount."""
        try:
            self.namespace.write(_vpath(file_path), content.encode("utf-8"))
        except ReadOnlyError:
            return WriteResult(error=_permission_error("write", file_path))
        except SkillstoreError as e:
            return WriteResult(error=f"Error writing file '{file_path}': {e}")
        return WriteResult(path=file_path)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:  # noqa: FBT001, FBT002
        """Replaces text in a file, conditional on the version read: a
        write landing in between makes the edit fail rather than be lost."""
        vpath = _vpath(file_path)
        try:
            blob = self.namespace.read(vpath)
        except SkillstoreError as e:
            if e.kind in _MISSING or e.kind in ("is_a_directory", "not_a_directory"):
                return EditResult(error=f"Error: File '{file_path}' not found")
            return EditResult(error=f"Error editing file '{file_path}': {e}")
        try:
            content = blob.data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
        except UnicodeDecodeError as e:
            return EditResult(error=f"Error editing file '{file_path}': {e}")
        old_string = old_string.replace("\r\n", "\n").replace("\r", "\n")
        new_string = new_string.replace("\r\n", "\n").replace("\r", "\n")
        result = perform_string_replacement(content, old_string, new_string, replace_all)
        if isinstance(result, str):
            return EditResult(error=result)
        new_content, occurrences = result
        try:
            self.namespace.write(vpath, new_content.encode("utf-8"), expected=blob.version)
        except ReadOnlyError:
            return EditResult(error=_permission_error("write", file_path))
        except SkillstoreError as e:
            return EditResult(error=f"Error editing file '{file_path}': {e}")
        return EditResult(path=file_path, occurrences=int(occurrences))

    def delete(self, file_path: str) -> DeleteResult:
        """Deletes a file, or a directory with everything below it."""
        vpath = _vpath(file_path)
        try:
            entry = self.namespace.stat(vpath)
            if entry.kind == "dir":
                walked, _ = self.namespace.walk(vpath)
                files = [e.path for e in walked if e.kind == "file"]
                if not files:
                    return DeleteResult(error=f"Error: '{file_path}' not found")
                for path in sorted(files, key=lambda p: p.count("/"), reverse=True):
                    self.namespace.delete(path)
            else:
                self.namespace.delete(vpath)
        except ReadOnlyError:
            return DeleteResult(error=_permission_error("write", file_path))
        except SkillstoreError as e:
            if e.kind in _MISSING:
                return DeleteResult(error=f"Error: '{file_path}' not found")
            return DeleteResult(error=f"Error deleting '{file_path}': {e}")
        return DeleteResult(path=file_path)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Writes each file; failures per path."""
        responses = []
        for path, content in files:
            try:
                self.namespace.write(_vpath(path), bytes(content))
                responses.append(FileUploadResponse(path=path))
            except SkillstoreError as e:
                responses.append(FileUploadResponse(path=path, error=_upload_error(e)))
        return responses


SEARCH_TOOL_NAME = "search_skills"
"""The name of the search tool `FastSkillsMiddleware(search=True)` offers."""

SEARCH_TOOL_MAX_LIMIT = 50
"""The most results one call of the search tool returns."""

_SEARCH_TOOL_DESCRIPTION = (
    "Search the available skills by keywords. Returns the best matching skills, best first, "
    "each with its name, description, path (its SKILL.md: read that file to use the skill) "
    f"and score. `limit` is the most results (1 to {SEARCH_TOOL_MAX_LIMIT}, default 5)."
)


class FastSkillsMiddleware(SkillsMiddleware):
    """deepagents' `SkillsMiddleware` with its catalog loaded by one Rust
    call: the same `skills_metadata` and `skills_load_errors` in the state,
    and deepagents' own rendering of the system prompt section.

    `SkillsMiddleware(backend=SkillstoreBackend(...), sources=[...])` reads
    each SKILL.md through the backend and parses it in Python; this class
    takes a `SkillstoreBackend` (or a namespace) and the same sources, and
    loads them as one skillstore catalog.

    The sources are checked as `skillstore` checks them: a source at a
    directory the namespace's configuration names is that source, so its
    lock entries and signature policy apply. A skill those checks withhold
    is not shown; it is logged as a warning and listed in
    `skills_load_errors`, which deepagents shows the agent.

    With `search=True` the middleware also offers the agent a tool,
    `search_skills(query, limit=5)`, answering with the enabled skills of
    these sources that best match the query (full-text search over their
    names, descriptions and SKILL.md bodies), as a JSON list of objects
    with `name`, `description`, `path` and `score`, so the agent can read
    the SKILL.md it picks. Each call sees the sources as they are then; the index is
    kept in memory and reads again only the SKILL.md files that changed.
    """

    def __init__(
        self,
        *,
        backend: SkillstoreBackend | Namespace,
        sources: Sequence[Any],
        search: bool = False,
        **kwargs: Any,
    ) -> None:
        if isinstance(backend, Namespace):
            backend = SkillstoreBackend(namespace=backend)
        super().__init__(backend=backend, sources=sources, **kwargs)
        self._namespace = backend.namespace
        # The sources keep the names the namespace's configuration gives
        # them (or `--source PATH` would), so its lock and signature
        # policies apply to them as they do to `skillstore` itself.
        self._paths = list(self.sources)
        self._source_index = {s.name: i for i, s in enumerate(self._namespace.sources_at(self._paths))}
        self._search_catalog: Catalog | None = None
        self._search_lock = threading.Lock()
        if search:
            self.tools = [self._search_tool()]

    def _load(self, catalog: Any) -> dict[str, Any]:
        """The state update of `catalog`: its skills, and as load errors
        (which deepagents logs and shows the agent) every source it could
        not read and every skill an integrity check withheld."""
        errors = []
        withheld = []
        for d in catalog.diagnostics:
            index = self._source_index.get(d.source) if d.source is not None else None
            if index is None:
                continue
            source = self.sources[index]
            if d.kind == "source_not_found":
                errors.append(f"Cannot load skills from '{source}': Path '{source}': path_not_found")
            elif d.kind in ("source_unavailable", "source_stale"):
                errors.append(f"Cannot load skills from '{source}': {d.message}")
            elif d.withheld:
                withheld.append(f"Skill at '{d.path}' from '{source}' is withheld ({d.kind}): {d.message}")
        if withheld:
            logger.warning("Skills withheld by the integrity checks: %s", withheld)
        return {"skills_metadata": catalog.deepagents_metadata(), "skills_load_errors": errors + withheld}

    # `config` is typed `RunnableConfig`: langgraph passes it to a hook only
    # when the annotation says so.
    def before_agent(self, state: Any, runtime: Any, config: RunnableConfig) -> Any:  # noqa: ARG002
        """Loads the catalog unless the state already holds one."""
        if state.get("skills_metadata") is not None:
            return None
        return self._load(self._namespace.load_at(self._paths))

    async def abefore_agent(self, state: Any, runtime: Any, config: RunnableConfig) -> Any:  # noqa: ARG002
        """Loads the catalog on the event loop's executor."""
        if state.get("skills_metadata") is not None:
            return None
        return self._load(await self._namespace.aload_at(self._paths))

    # -- search ------------------------------------------------------------

    def _current_catalog(self) -> Catalog:
        """The sources' catalog now: loaded at the first search, refreshed
        at each later one (the refreshed catalog keeps the search index)."""
        with self._search_lock:
            if self._search_catalog is None:
                self._search_catalog = self._namespace.load_at(self._paths)
            else:
                self._search_catalog = self._search_catalog.refresh()
            return self._search_catalog

    def search_skills(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """The enabled skills best matching `query`, best first, at most
        `limit` (kept within 1 to `SEARCH_TOOL_MAX_LIMIT`): each a dict of
        `name`, `description`, `path` and `score`."""
        limit = max(1, min(int(limit), SEARCH_TOOL_MAX_LIMIT))
        hits = self._current_catalog().search(query, limit)
        return [{"name": h.name, "description": h.description, "path": h.path, "score": h.score} for h in hits]

    async def asearch_skills(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """`search_skills` on the event loop's executor."""
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(None, self.search_skills, query, limit)

    def _search_tool(self) -> BaseTool:
        # The answer is JSON text, so the model sees `[]` when nothing matches.
        def search_skills(query: str, limit: int = 5) -> str:
            return json.dumps(self.search_skills(query, limit), ensure_ascii=False)

        async def asearch_skills(query: str, limit: int = 5) -> str:
            return json.dumps(await self.asearch_skills(query, limit), ensure_ascii=False)

        return StructuredTool.from_function(
            func=search_skills,
            coroutine=asearch_skills,
            name=SEARCH_TOOL_NAME,
            description=_SEARCH_TOOL_DESCRIPTION,
        )
