#!/bin/sh
# Creates benchmarks/peers/.venv with django-jobs (from this checkout) and its peers from PyPI.
# Usage: sh benchmarks/peers/setup.sh [python3]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${1:-python3}
"$python" -m venv "$here/.venv"
"$here/.venv/bin/pip" install -q -r "$here/requirements.txt" -e "$root"
"$here/.venv/bin/pip" freeze > "$here/.venv/freeze.txt"
echo "peers venv ready: $here/.venv"
