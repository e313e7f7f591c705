#!/usr/bin/env python3
"""Print, as JSON, the skills LangChain deepagents loads from a layered tree.

Run with a Python that has deepagents installed:

    python deepagents_dump.py ROOT [SOURCE ...]      (default sources: /base/ /user/ /project/ /team/)

It calls SkillsMiddleware.before_agent, the hook an agent runs, over a
FilesystemBackend in virtual mode rooted at ROOT, and prints the resulting
skills_metadata list (name, description, path, license, compatibility,
metadata, allowed_tools), in deepagents' order.
"""

import json
import logging
import sys

from deepagents.backends.filesystem import FilesystemBackend
from deepagents.middleware.skills import SkillsMiddleware


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    root, sources = argv[0], argv[1:] or ["/base/", "/user/", "/project/", "/team/"]
    logging.getLogger("deepagents").setLevel(logging.ERROR)
    middleware = SkillsMiddleware(backend=FilesystemBackend(root_dir=root, virtual_mode=True), sources=sources)
    update = middleware.before_agent({}, None, None) or {}
    skills = [
        {
            "name": s["name"],
            "description": s["description"],
            "path": s["path"],
            "license": s.get("license"),
            "compatibility": s.get("compatibility"),
            "metadata": dict(s.get("metadata") or {}),
            "allowed_tools": list(s.get("allowed_tools") or []),
        }
        for s in update.get("skills_metadata", [])
    ]
    json.dump(skills, sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
