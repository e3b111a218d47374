#!/usr/bin/env bash
# Makes a relocatable bundle of oa's header-only build dependencies (Eigen,
# Boost.Hana, nlohmann_json, doctest, CLI11) from Debian's packages, for a
# machine with no network and no -dev packages (a cluster's GPU node). Run on
# a Debian 12 machine with apt; needs no root.
#
#   bench/bundle_deps.sh            bundle into .deps/ (git ignores it)
#   bench/bundle_deps.sh DIR        bundle into DIR
#
# The bundle is an install prefix (include/, lib/, share/): builds find it
# through CMAKE_PREFIX_PATH=<bundle>; .ci/deps.sh, tests/run.sh and
# bench/gpu_check.sh use .deps/ by themselves when it is there.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
if (($# > 1)); then
  echo "usage: $0 [DIR]" >&2
  exit 2
fi
dest=${1:-.deps}

for tool in apt-get apt-cache dpkg c++; do
  command -v "$tool" >/dev/null 2>&1 || { echo "bundle_deps: $tool not found (this script needs Debian's apt and a C++ compiler)" >&2; exit 1; }
done

# libboost-dev is an empty package depending on the versioned one that holds
# the headers and the CMake config files.
boost_pkg=$(apt-cache depends libboost-dev 2>/dev/null | sed -n 's/^ *Depends: \(libboost[0-9.]*-dev\)$/\1/p' | head -n 1)
if [[ -z "$boost_pkg" ]]; then
  echo "bundle_deps: cannot tell which package holds Boost's headers (apt-cache depends libboost-dev; try apt-get update)" >&2
  exit 1
fi
packages=(libeigen3-dev "$boost_pkg" nlohmann-json3-dev doctest-dev libcli11-dev)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir -m 777 "$work/debs"  # apt's download user writes here
echo "bundle_deps: downloading ${packages[*]}"
if ! (cd "$work/debs" && apt-get download -q "${packages[@]}") 2>"$work/apt.err"; then
  cat "$work/apt.err" >&2
  echo "bundle_deps: apt-get download failed (no network, or apt's lists are stale: apt-get update)" >&2
  exit 1
fi
grep -v '^W: Download is performed unsandboxed' "$work/apt.err" >&2 || true
for pkg in "${packages[@]}"; do
  compgen -G "$work/debs/${pkg}_*.deb" >/dev/null || { echo "bundle_deps: apt-get download did not fetch $pkg" >&2; exit 1; }
done
for deb in "$work"/debs/*.deb; do
  dpkg -x "$deb" "$work/root"
done

prefix=$work/root/usr
rm -rf "$prefix/share/doc" "$prefix/share/man" "$prefix/share/lintian"

# doctest's export names /usr: make it find the prefix from its own place
# (lib/cmake/doctest/ is three levels under the prefix).
doctest_targets=$prefix/lib/cmake/doctest/doctestTargets.cmake
grep -q 'set(_IMPORT_PREFIX "/usr")' "$doctest_targets" || {
  echo "bundle_deps: $doctest_targets does not set _IMPORT_PREFIX to /usr as expected" >&2
  exit 1
}
sed -i 's|set(_IMPORT_PREFIX "/usr")|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' \
  "$doctest_targets"

# Boost: only Hana, what Hana includes, and what FindBoost and Boost's CMake
# config read (version.hpp, config). The includes come from the compiler.
boost=$prefix/include/boost
kept=$work/boost-kept
mkdir -p "$kept"
printf '#include <boost/hana.hpp>\n#include <boost/version.hpp>\n#include <boost/config.hpp>\n' >"$work/probe.cpp"
c++ -std=c++20 -M -I "$prefix/include" "$work/probe.cpp" >"$work/probe.d"
tr ' \\' '\n\n' <"$work/probe.d" | sed -n "s|^$prefix/include/boost/||p" | sort -u >"$work/boost-headers"
(cd "$boost" && cp -a --parents hana hana.hpp version.hpp config config.hpp "$kept/")
while read -r header; do
  [[ -e "$kept/$header" ]] || (cd "$boost" && cp -a --parents "$header" "$kept/")
done <"$work/boost-headers"
rm -rf "$boost"
mv "$kept" "$boost"
# Of Boost's CMake files, the headers' package only: no compiled libraries come along.
for d in "$prefix"/lib/*/cmake/*; do
  case $(basename "$d") in
    Boost-* | boost_headers-* | BoostDetectToolset-*) ;;
    *) rm -rf "$d" ;;
  esac
done
# Drop the .a/.so links of Boost's compiled libraries and their pkg-config files.
find "$prefix/lib" \( -name 'libboost_*' -o -name '*.so' -o -name '*.a' \) -exec rm -f {} +

{
  echo "oa dependency bundle: an install prefix for CMAKE_PREFIX_PATH"
  echo "made by bench/bundle_deps.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ) from:"
  for deb in "$work"/debs/*.deb; do
    dpkg-deb -W --showformat='  ${Package} ${Version}\n' "$deb"
  done
} >"$prefix/BUNDLE.txt"

rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$prefix" "$dest"
size=$(du -sh "$dest" | cut -f1)
packed=$(tar -C "$dest" -czf - . | wc -c)
echo "bundle_deps: bundle in $dest ($size, $((packed / 1024)) KiB as tar.gz); packages:"
sed -n '3,$p' "$dest/BUNDLE.txt"
echo "bundle_deps: builds use it with CMAKE_PREFIX_PATH=$(cd "$dest" && pwd)"
