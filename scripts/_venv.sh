# Sourced by run.sh and test.sh: make .venv and install kproto (editable) with the extras
# given, only when pyproject.toml, those extras or the Python changed since the last install
# (a stamp per extras set in .venv holds their hash); edits to kproto's source need no
# reinstall.
ensure_venv() {
  local extras=$1 py=${PYTHON:-python3}
  local stamp=".venv/.kproto-installed-${extras//,/-}"
  if [ ! -x .venv/bin/python ]; then
    "$py" -m venv .venv
  fi
  local want
  want=$(.venv/bin/python -c 'import hashlib, sys
h = hashlib.sha256(open("pyproject.toml", "rb").read())
h.update("\0{}\0{}".format(sys.argv[1], sys.version).encode())
print(h.hexdigest())' "$extras")
  if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e ".[$extras]"
    echo "$want" > "$stamp"
  fi
}
