#!/usr/bin/env bash
# The server's MCP through the official Python SDK: makes a virtual
# environment under target/ (once), builds the command, runs the checks.
set -euo pipefail
cd "$(dirname "$0")/../../.."

venv=target/py-mcp
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import mcp' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet 'mcp==2.3.0'
fi
cargo build --quiet -p skillstore-cli --bin skillstore
target_dir="${CARGO_TARGET_DIR:-target}"
"$venv/bin/python" server/tests/python/test_mcp.py "$target_dir/debug/skillstore"
