#!/usr/bin/env bash
# Draws bench/plot.py's pictures with matplotlib from a virtual environment
# (build/plot/venv, made on first use with pip), or the system's matplotlib
# when pip cannot install (offline; Debian: python3-matplotlib).
#
#   bench/plot.sh RECORDS.jsonl... [--out DIR]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv=${OA_PLOT_VENV:-build/plot/venv}
py=python3
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv" 2>/dev/null || echo "plot.sh: cannot create a virtual environment at $venv (python3-venv missing?)" >&2
fi
if [[ -x $venv/bin/python ]]; then
  if "$venv/bin/python" -c 'import matplotlib' 2>/dev/null ||
     "$venv/bin/python" -m pip install --quiet --disable-pip-version-check matplotlib; then
    py=$venv/bin/python
  else
    echo "plot.sh: pip cannot install matplotlib (offline?): trying the system's" >&2
  fi
fi
exec "$py" bench/plot.py "$@"
