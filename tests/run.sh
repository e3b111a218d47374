#!/usr/bin/env bash
# The whole test suite from a fresh clone: dependencies, configure, build, ctest.
# ctest runs last so its summary line ends the output and its status is ours.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash .ci/deps.sh
# The dependency bundle of bench/bundle_deps.sh, when there is one (offline machines).
bundle=${OA_DEPS_BUNDLE:-$PWD/.deps}
if [[ -f "$bundle/BUNDLE.txt" ]]; then
  export CMAKE_PREFIX_PATH="$bundle${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
fi
cmake --preset release
cmake --build --preset release -j"$(nproc)"
exec ctest --preset release -j"$(nproc)"
