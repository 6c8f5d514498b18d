#!/usr/bin/env bash
# Set up a virtualenv with the test extras, type-check kproto/ and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test,all]'
# mypy's settings are pyproject.toml's [tool.mypy]; any error fails the run.
.venv/bin/python -m mypy
exec .venv/bin/python -m pytest "$@"
