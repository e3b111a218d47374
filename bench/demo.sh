#!/usr/bin/env bash
# Builds oa-bench with the release preset and runs its demo; arguments go to
# oa-bench after --demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash .ci/deps.sh
cmake --preset release
cmake --build --preset release -j"$(nproc)" --target oa-bench

build=build/release
exec "$build/bench/oa-bench" --demo "$@"
