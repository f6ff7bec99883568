#!/usr/bin/env bash
# Configures and builds into build/ (Release) or build-asan/ (RAPID_SANITIZE=ON) with Ninja.
# usage: scripts/build.sh [release|asan] [ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
# Lets ccache share objects between checkouts in different folders (CI clones elsewhere).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
kind=${1:-release}; shift || true
case "$kind" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  # -O1 without debug info: sanitizer builds compile fast and still run the fuzz loops quickly.
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=None "-DCMAKE_CXX_FLAGS=-O1 -fno-omit-frame-pointer" -DRAPID_SANITIZE=ON -DRAPID_BENCH=OFF) ;;
  *) echo "unknown build kind $kind" >&2; exit 2 ;;
esac
[ -f "$dir/build.ninja" ] || cmake -S . -B "$dir" -G Ninja "${flags[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)" ${@:+--target "$@"}
