#!/usr/bin/env bash
# Runs test_tritonclient.py against kiln-serve with Triton's own clients, in
# a venv made from PyPI (tritonclient[http,grpc], numpy, pytest). Where the
# venv cannot be made (no network, no python3-venv), says so and skips.
# Usage: run_pytest.sh KILN_SERVE_BIN
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${KILN_SERVE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/serve-venv}
if [ ! -x "$venv/bin/pytest" ] || ! "$venv/bin/python" -c "import tritonclient.grpc, tritonclient.http, numpy" 2>/dev/null; then
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check \
           "tritonclient[http,grpc]" numpy pytest; } > "$venv.log" 2>&1; then
    echo "SKIPPED: cannot make the venv for tritonclient from PyPI (see $venv.log):"
    tail -3 "$venv.log"
    exit 0
  fi
fi
KILN_SERVE_BIN="$1" exec "$venv/bin/pytest" -q -p no:cacheprovider "$here/test_tritonclient.py"
