#!/usr/bin/env bash
# The server's MCP through the official Python SDK: makes a virtual
# environment under target/ (once), builds the command, runs the checks.
set -euo pipefail
cd "$(dirname "$0")/../../.."

venv=target/venvs/mcp
requirement='mcp==2.3.0'
if [ ! -f "$venv/.stamp" ] || [ "$(cat "$venv/.stamp")" != "$requirement" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$requirement"
  echo "$requirement" >"$venv/.stamp"
fi
cargo build --quiet -p skillstore-cli --bin skillstore
target_dir="${CARGO_TARGET_DIR:-target}"
"$venv/bin/python" server/tests/python/test_mcp.py "$target_dir/debug/skillstore"
