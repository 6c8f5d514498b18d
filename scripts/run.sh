#!/usr/bin/env bash
# Set up a virtualenv with the embedded broker and codecs, then run `python -m kproto ARGS`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[embedded,all]'
exec .venv/bin/python -m kproto "$@"
