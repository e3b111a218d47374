#!/usr/bin/env bash
# The whole test suite from a fresh clone: dependencies, configure, build, ctest.
# ctest runs last so its summary line ends the output and its status is ours.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash .ci/deps.sh
cmake --preset release
cmake --build --preset release -j"$(nproc)"
exec ctest --preset release -j"$(nproc)"
