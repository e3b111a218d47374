#!/usr/bin/env bash
# Runs bench/gpu_check.sh as on an offline GPU node, on this machine (root,
# Debian 12, no GPU needed): in a private mount namespace with no network,
# where the Debian -dev packages of the libraries (their headers, CMake and
# pkg-config files), dpkg's record of them and apt's cache are hidden and
# apt-get is a trap that records any call. The source tree is the committed
# HEAD plus the dependency bundle (.deps/), as a GPU node receives it; the
# tools are pip's CMake 4.x and ninja (the build, the tests) and Debian's
# CMake 3.25 (a second configure).
#
#   bench/simulate_offline.sh [WORK_DIR]    default /tmp/oa-offline
#
# Passes when gpu_check.sh gets through dependencies, configure, build and
# every test that needs no GPU, exits 3 (no GPU: the GPU steps not run),
# never calls apt-get, and leaves at most 8 files in $OUT. A full build with
# -j2 takes a while (20-30 minutes on 2 cores).
set -euo pipefail

# All of it in one function, read whole before it runs: an edit of this file
# during the long build cannot change what runs.
main() {
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${1:-/tmp/oa-offline}
cmake4=${OA_CMAKE4_VENV:-/tmp/cmake4}

if ((EUID != 0)); then
  echo "simulate_offline: needs root (unshare -m -n, mount)" >&2
  exit 2
fi

# Outside the namespace, with the network: the bundle and pip's CMake 4.
if [[ ! -f "$repo/.deps/BUNDLE.txt" ]]; then
  "$repo/bench/bundle_deps.sh"
fi
if [[ ! -x "$cmake4/bin/cmake" ]]; then
  python3 -m venv "$cmake4"
  "$cmake4/bin/pip" install -q 'cmake>=4' ninja
fi

rm -rf "$work"
mkdir -p "$work/src" "$work/out" "$work/empty"
git -C "$repo" archive HEAD | tar -x -C "$work/src"
cp -a "$repo/.deps" "$work/src/.deps"
echo "simulate_offline: tree of $(git -C "$repo" rev-parse --short HEAD) with .deps/ in $work/src"

# dpkg's status without the library packages.
hidden_packages="libeigen3-dev libboost-dev libboost1.74-dev nlohmann-json3-dev doctest-dev libcli11-dev"
awk -v hide="$hidden_packages" 'BEGIN { RS = ""; ORS = "\n\n"; n = split(hide, h, " "); for (i = 1; i <= n; i++) skip[h[i]] = 1 }
  { split($0, lines, "\n"); sub(/^Package: /, "", lines[1]); sub(/:.*/, "", lines[1]); if (!(lines[1] in skip)) print }' \
  /var/lib/dpkg/status >"$work/dpkg-status"
printf '#!/bin/sh\necho "apt-get $*" >>%s/apt-get-calls\necho "apt-get: no network (offline simulation)" >&2\nexit 100\n' \
  "$work" >"$work/apt-get"
chmod +x "$work/apt-get"

export work cmake4
unshare -m -n bash -euo pipefail -c '
  mount --make-rprivate /
  hide() {
    for p in "$@"; do
      if [[ -d "$p" ]]; then
        mount -t tmpfs -o ro,size=1m none "$p"
      elif [[ -e "$p" ]]; then
        mount --bind /dev/null "$p"
      fi
    done
  }
  hide /usr/include/eigen3 /usr/include/boost /usr/include/nlohmann /usr/include/doctest /usr/include/CLI \
    /usr/lib/cmake/doctest /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json /usr/share/eigen3 \
    /usr/lib/x86_64-linux-gnu/cmake/Boost-* /usr/lib/x86_64-linux-gnu/cmake/boost_* \
    /usr/lib/x86_64-linux-gnu/cmake/BoostDetectToolset-* \
    /usr/share/pkgconfig/eigen3.pc /usr/share/pkgconfig/nlohmann_json.pc /usr/share/pkgconfig/CLI11.pc \
    /var/cache/apt /var/lib/apt/lists
  mount --bind "$work/dpkg-status" /var/lib/dpkg/status
  for a in /usr/bin/apt-get /usr/bin/apt; do mount --bind "$work/apt-get" "$a"; done

  # /proc/net/dev is per network namespace; sysfs still shows the host interfaces.
  echo "simulate_offline: inside: network interfaces: $(sed -n "s/^ *\([^:]*\):.*/\1/p" /proc/net/dev | tr "\n" " ")"
  for f in /usr/include/eigen3/Eigen/Core /usr/include/boost/hana.hpp /usr/include/nlohmann/json.hpp \
           /usr/include/doctest/doctest.h /usr/include/CLI/CLI.hpp /usr/lib/cmake/doctest/doctestConfig.cmake; do
    [[ ! -e "$f" ]] || { echo "simulate_offline: $f is still visible" >&2; exit 1; }
  done
  if dpkg-query -W -f="\${Status}" libeigen3-dev 2>/dev/null | grep -q "install ok installed"; then
    echo "simulate_offline: dpkg still records libeigen3-dev" >&2
    exit 1
  fi
  echo "simulate_offline: the -dev packages, their dpkg records and apt are hidden"

  cd "$work/src"
  # Debian CMake 3.25: configure only, with the bundle.
  rc=0
  CMAKE_PREFIX_PATH=$PWD/.deps /usr/bin/cmake -S . -B build/configure-3.25 -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DOA_ENABLE_CUDA=ON >"$work/configure-3.25.log" 2>&1 || rc=$?
  echo "simulate_offline: configure with $(/usr/bin/cmake --version | head -n 1): exit $rc (log: $work/configure-3.25.log)"
  echo "$rc" >"$work/configure-3.25.rc"

  # pip CMake 4 and ninja first on PATH: the whole check.
  rc=0
  PATH=$cmake4/bin:$PATH OUT=$work/out bash bench/gpu_check.sh --build build/offline || rc=$?
  echo "$rc" >"$work/gpu_check.rc"
'

rc_configure=$(cat "$work/configure-3.25.rc")
rc_check=$(cat "$work/gpu_check.rc")
files=$(find "$work/out" -type f | wc -l)
problems=()
((rc_configure == 0)) || problems+=("configure with Debian's CMake 3.25 failed (exit $rc_configure)")
((rc_check == 3)) || problems+=("gpu_check.sh exited $rc_check, not 3 (no GPU, everything else passed)")
[[ ! -e "$work/apt-get-calls" ]] || problems+=("apt-get was called: $(tr '\n' ';' <"$work/apt-get-calls")")
((files <= 8)) || problems+=("$files files in \$OUT, more than 8")
grep -q '^passed .* tests (no GPU)$' "$work/out/summary.txt" || problems+=("the tests did not pass")

echo
echo "simulate_offline: \$OUT holds $files file(s): $(cd "$work/out" && find . -type f | sort | tr '\n' ' ')"
if ((${#problems[@]})); then
  echo "simulate_offline: FAILED:"
  printf '  %s\n' "${problems[@]}"
  exit 1
fi
echo "simulate_offline: passed: offline, both CMakes configure; build and every test that needs no GPU pass;" \
  "the GPU steps are listed as not run"
}
main "$@"
exit
