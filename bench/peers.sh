#!/usr/bin/env bash
# The host path beside NumPy, numexpr and a hand-fused OpenMP loop, side by
# side in one run (bench/peers.py). Creates a virtual environment under
# build/peers/venv with numexpr, NumPy and SciPy from pip, builds oa-bench and
# oa-fused-baseline into build/perf, and runs every program it can:
#
#   bench/peers.sh [--elements N] [--rounds R] [--workloads haversine,blackscholes] [--verify] [--json FILE]
#
# Without network (pip cannot install), it says so and runs the C++ programs
# (and the Python ones if the packages are already there).
set -u
cd "$(dirname "$0")/.."
venv=${OA_PEERS_VENV:-build/peers/venv}
build=${OA_PEERS_BUILD:-build/perf}

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" || echo "peers.sh: cannot create a virtual environment at $venv (python3-venv missing?)" >&2
fi
py=python3
if [ -x "$venv/bin/python" ]; then
  py=$venv/bin/python
  if ! "$py" -c "import numpy, numexpr, scipy" 2>/dev/null; then
    if ! "$py" -m pip install --quiet --disable-pip-version-check numexpr numpy scipy; then
      echo "peers.sh: pip cannot install numexpr, numpy and scipy (offline?): running what is installed" >&2
    fi
  fi
fi

if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null || echo "peers.sh: cmake configure failed" >&2
fi
ninja -C "$build" oa-bench oa-fused-baseline >/dev/null || echo "peers.sh: building oa-bench / oa-fused-baseline failed" >&2

exec "$py" bench/peers.py --bin-dir "$build/bench" "$@"
