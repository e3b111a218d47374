#!/usr/bin/env bash
# Installs the Debian packages the build needs; does nothing when all are present,
# so CI and tests/run.sh can call it on every run.
set -euo pipefail

packages=(cmake ninja-build g++ libeigen3-dev libboost-dev nlohmann-json3-dev doctest-dev libcli11-dev)

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "deps: all ${#packages[@]} build packages are installed"
  exit 0
fi

sudo_cmd=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
  else
    echo "deps: missing ${missing[*]}, and not root without sudo: install them and retry" >&2
    exit 1
  fi
fi

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
