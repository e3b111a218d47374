#!/usr/bin/env bash
# Checks the build's tools and libraries; does nothing when all are present,
# so CI and tests/run.sh can call it on every run.
#
# Tools (cmake >= 3.25, ninja, a C++ compiler, python3) are looked up on PATH,
# wherever they come from (Debian, pip, modules). The header-only libraries
# (Eigen, Boost.Hana, nlohmann_json, doctest, CLI11) come from the bundle that
# bench/bundle_deps.sh makes, when there is one ($OA_DEPS_BUNDLE, else .deps/
# at the top of the source tree): then apt-get is never called, and the build
# finds them with CMAKE_PREFIX_PATH=<bundle>. Without a bundle they are the
# Debian packages, and what is missing is installed with apt-get.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=${OA_DEPS_BUNDLE:-$repo/.deps}

# tool name -> the Debian package that provides it
declare -A tool_package=([cmake]=cmake [ninja]=ninja-build [c++]=g++ [python3]=python3)
missing_tools=()
for tool in cmake ninja c++ python3; do
  if [[ $tool == c++ && -n "${CXX:-}" ]]; then
    command -v "$CXX" >/dev/null 2>&1 || missing_tools+=("$tool (CXX=$CXX)")
  elif ! command -v "$tool" >/dev/null 2>&1; then
    missing_tools+=("$tool")
  fi
done

cmake_too_old() {
  local version
  version=$(cmake --version | sed -n '1s/^cmake version \([0-9][0-9.]*\).*/\1/p')
  [[ -n "$version" ]] || return 1
  [[ "$(printf '%s\n3.25\n' "$version" | sort -V | head -n 1)" != 3.25 ]]
}

if [[ -f "$bundle/BUNDLE.txt" ]]; then
  headers=(eigen3/Eigen/Core boost/hana.hpp nlohmann/json.hpp doctest/doctest.h CLI/CLI.hpp)
  incomplete=()
  for h in "${headers[@]}"; do
    [[ -f "$bundle/include/$h" ]] || incomplete+=("include/$h")
  done
  if ((${#incomplete[@]})); then
    echo "deps: the bundle $bundle lacks ${incomplete[*]}: make it again with bench/bundle_deps.sh" >&2
    exit 1
  fi
  if ((${#missing_tools[@]})); then
    echo "deps: not on PATH: ${missing_tools[*]} (with a bundle nothing is installed: put them on PATH," \
      "e.g. pip install cmake ninja)" >&2
    exit 1
  fi
  if cmake_too_old; then
    echo "deps: $(cmake --version | head -n 1) is older than the 3.25 oa needs (pip install 'cmake>=3.25')" >&2
    exit 1
  fi
  echo "deps: tools on PATH ($(cmake --version | head -n 1), ninja $(ninja --version), $(command -v "${CXX:-c++}"))"
  echo "deps: libraries from the bundle $bundle; builds need CMAKE_PREFIX_PATH=$bundle"
  exit 0
fi

packages=(libeigen3-dev libboost-dev nlohmann-json3-dev doctest-dev libcli11-dev libsleef-dev libtbb-dev libopenmpi-dev openmpi-bin)
# --sanitizers: also the compiler of the asan preset and its sanitizer runtimes.
if [[ "${1:-}" == --sanitizers ]]; then
  packages+=(clang-14 libclang-rt-14-dev)
fi
missing=()
for tool in "${missing_tools[@]}"; do
  missing+=("${tool_package[${tool%% *}]}")
done
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  if cmake_too_old; then
    echo "deps: $(cmake --version | head -n 1) is older than the 3.25 oa needs (pip install 'cmake>=3.25')" >&2
    exit 1
  fi
  echo "deps: the build's tools are on PATH and its ${#packages[@]} library packages are installed"
  exit 0
fi

offline_hint="on a machine without network, make a bundle elsewhere with bench/bundle_deps.sh and bring .deps/ along"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: missing ${missing[*]}, and there is no apt-get: $offline_hint" >&2
  exit 1
fi
sudo_cmd=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
  else
    echo "deps: missing ${missing[*]}, and not root without sudo: install them and retry, or $offline_hint" >&2
    exit 1
  fi
fi

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo_cmd[@]}" apt-get update -qq || ! "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  echo "deps: apt-get could not install ${missing[*]}; $offline_hint" >&2
  exit 1
fi
