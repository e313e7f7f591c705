#!/usr/bin/env bash
# The Python package's tests: a virtual environment under
# target/venvs/python (made once, reused while the requirements below are
# unchanged) with maturin, pytest and deepagents; the extension built in
# release mode with its test helpers (feature `testkit`: the hostile-path
# corpus and an in-process S3 server) and installed into it; then pytest.
# Exits non-zero on any failure, and when pytest collected no test.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/venvs/python
requirements=(
  'maturin==1.9.6'
  'pytest==8.4.2'
  'deepagents==0.7.32'
)
stamp="${requirements[*]}"

echo "== python environment ($venv)"
if [ ! -f "$venv/.stamp" ] || [ "$(cat "$venv/.stamp")" != "$stamp" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${requirements[@]}"
  echo "$stamp" >"$venv/.stamp"
fi

echo "== build the extension (maturin develop --release --features testkit)"
(
  cd bindings/python
  VIRTUAL_ENV="$PWD/../../$venv" CARGO_TARGET_DIR="$PWD/../../target" \
    "../../$venv/bin/maturin" develop --release --features testkit --quiet
)

echo "== pytest"
# The command the package's reports are compared with.
cargo build --quiet -p skillstore-cli
export SKILLSTORE_BINARY="$PWD/${CARGO_TARGET_DIR:-target}/debug/skillstore"
"$venv/bin/python" -m pytest bindings/python/tests -q -p no:cacheprovider "$@"
