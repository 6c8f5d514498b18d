#!/usr/bin/env bash
# Set up a virtualenv with the embedded broker and codecs, then run `python -m kproto ARGS`.
# The install runs only when pyproject.toml, the extras or the Python changed since the last
# one (a stamp in .venv holds their hash); kproto itself is installed editable, so edits to
# its source need no reinstall.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS='embedded,all'
STAMP=.venv/.kproto-run-installed
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
want=$(.venv/bin/python -c 'import hashlib, sys
h = hashlib.sha256(open("pyproject.toml", "rb").read())
h.update("\0{}\0{}".format(sys.argv[1], sys.version).encode())
print(h.hexdigest())' "$EXTRAS")
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[$EXTRAS]"
  echo "$want" > "$STAMP"
fi
exec .venv/bin/python -m kproto "$@"
