#!/usr/bin/env bash
# Configures and builds into build/ (Release) or build-asan/ (RAPID_SANITIZE=ON) with Ninja.
# usage: scripts/build.sh [release|asan] [ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-release}; shift || true
case "$kind" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DRAPID_SANITIZE=ON -DRAPID_BENCH=OFF) ;;
  *) echo "unknown build kind $kind" >&2; exit 2 ;;
esac
[ -f "$dir/build.ninja" ] || cmake -S . -B "$dir" -G Ninja "${flags[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)" ${@:+--target "$@"}
