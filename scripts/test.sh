#!/usr/bin/env bash
# Every test of the workspace, on a fresh machine: makes the Python
# environments the tests drive (moto, a second S3 server; skills-ref, the
# specification's reference validator; openapi-spec-validator, for the
# server's /openapi.json) and the npm tools (Node 22 and the
# `skills` command) under target/, starts moto on a free
# loopback port, and runs `cargo test` with the tests that need them
# included, then builds the book (docs/, mdBook), checks that every link of
# README.md and the book resolves and runs every bash block as
# written (scripts/docs_test.py), the server through the official Python MCP SDK
# (server/tests/python/run.sh), a 60 s soak of the server
# (scripts/soak_serve.py), every fuzz target for 20 s on its committed
# corpus (scripts/fuzz.sh --ci) and the Python package's tests
# (scripts/test-python.sh).
# Re-runs reuse the environments.
set -euo pipefail
cd "$(dirname "$0")/.."

venvs=target/venvs
mkdir -p "$venvs"

# venv NAME REQUIREMENT...: a virtual environment with these packages,
# made once and reused while the requirements are unchanged.
venv() {
  local name=$1
  shift
  local dir=$venvs/$name stamp="$*"
  if [ ! -f "$dir/.stamp" ] || [ "$(cat "$dir/.stamp")" != "$stamp" ]; then
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "$@"
    echo "$stamp" >"$dir/.stamp"
  fi
}

echo "== python environments"
venv moto 'moto[server]==5.2.5'
venv skills-ref 'skills-ref==0.1.1'
venv openapi 'openapi-spec-validator==0.9.0'

# npm_tool DIR PACKAGE: PACKAGE installed under target/tools/DIR once, reused
# while the package (with its version) is unchanged.
npm_tool() {
  local dir=target/tools/$1 package=$2
  if [ ! -f "$dir/.stamp" ] || [ "$(cat "$dir/.stamp")" != "$package" ]; then
    rm -rf "$dir"
    npm install --silent --no-audit --no-fund --prefix "$dir" "$package"
    echo "$package" >"$dir/.stamp"
  fi
}

echo "== npm tools (Node 22, the skills command)"
npm_tool node 'node@22.23.3'
export SKILLSTORE_NODE="$PWD/target/tools/node/node_modules/node/bin"
PATH="$SKILLSTORE_NODE:$PATH" npm_tool skills 'skills@1.7.4'
export SKILLSTORE_SKILLS="$PWD/target/tools/skills/node_modules/.bin/skills"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
"$venvs/moto/bin/moto_server" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 150); do
  if curl -fs -o /dev/null "http://127.0.0.1:$port/moto-api/"; then break; fi
  sleep 0.2
done
bucket=skillstore-ci
curl -fsS -X PUT "http://127.0.0.1:$port/$bucket" -o /dev/null
export SKILLSTORE_MOTO_ENDPOINT="http://127.0.0.1:$port/$bucket"
export SKILLSTORE_AGENTSKILLS="$PWD/$venvs/skills-ref/bin/agentskills"
export SKILLSTORE_OPENAPI_VALIDATOR="$PWD/$venvs/openapi/bin/openapi-spec-validator"

echo "== cargo test (every crate, the tests needing moto, skills-ref, openapi-spec-validator and the skills command included)"
cargo test --workspace --all-features -- --include-ignored

echo "== the book: mdBook (installed once into target/tools) builds docs/ into target/book"
mdbook=target/tools/bin/mdbook
if [ ! -x "$mdbook" ] || [ "$("$mdbook" --version)" != "mdbook v0.5.4" ]; then
  cargo install mdbook --version 0.5.4 --no-default-features --locked --root target/tools --quiet
fi
"$mdbook" build docs

echo "== README and the book: links resolve, every bash block runs as written (scripts/docs_test.py)"
python3 scripts/docs_test.py --binary "${CARGO_TARGET_DIR:-target}/debug/skillstore" --s3 "http://127.0.0.1:$port"

echo "== the server through the official Python MCP SDK (server/tests/python/run.sh)"
bash server/tests/python/run.sh

echo "== a 60 s soak of serve: legitimate clients beside hostile ones, no legitimate request may fail, no client may die, each legitimate client above its floor (scripts/soak_serve.py)"
python3 scripts/soak_serve.py --duration 60 --binary "${CARGO_TARGET_DIR:-target}/debug/skillstore"

echo "== fuzzing: every fuzz target for 20 s on a copy of its corpus in fuzz/corpus; a crash, leak or timeout fails (scripts/fuzz.sh --ci)"
bash scripts/fuzz.sh --ci 20

echo "== python package (scripts/test-python.sh)"
bash scripts/test-python.sh
