#!/usr/bin/env bash
# Set up a virtualenv with the embedded broker and codecs, then run `python -m kproto ARGS`.
# The install runs only when something it depends on changed (scripts/_venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh
ensure_venv 'embedded,all'
exec .venv/bin/python -m kproto "$@"
