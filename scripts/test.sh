#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, build, unit tests (ctest), the fuzz and
# loader-robustness tests again under AddressSanitizer + UBSan, then the Python end-to-end tests
# (real openai/anthropic SDKs against the real server, HF tokenizers and jinja2 as oracles).
# Each stage's wall time is printed at the end (also when a stage fails).
set -euo pipefail
cd "$(dirname "$0")/.."
export RAPID_MODEL_CACHE=${RAPID_MODEL_CACHE:-$HOME/.cache/rapid-mlx/models}

stage_times=()
stage() {  # ends the running stage (its time goes to the summary) and starts the one named, if any
  [ -n "${stage_name:-}" ] && stage_times+=("$(printf '%6d s  %s' $((SECONDS - stage_t0)) "$stage_name")")
  stage_name=$1 stage_t0=$SECONDS
  [ -z "$1" ] || echo "== $1"
}
summary() {
  stage ""
  printf '== stage times (%d s in all)\n' "$SECONDS"
  printf '%s\n' "${stage_times[@]}"
}
trap summary EXIT

stage "set-up: Debian packages"
scripts/setup.sh --packages

# The venvs and the model downloads wait mostly on the network, the build on both cores: on a fresh
# machine they take minutes each, so they run side by side (the build needs only the packages).
stage "build, with the venvs and model downloads alongside"
side_log=$(mktemp)
(scripts/setup.sh --test-clients && scripts/fetch_models.sh) >"$side_log" 2>&1 &
side=$!
build_rc=0
scripts/build.sh release || build_rc=$?
side_rc=0
wait "$side" || side_rc=$?
cat "$side_log"
rm -f "$side_log"
((build_rc == 0)) || { echo "release build failed" >&2; exit "$build_rc"; }
((side_rc == 0)) || { echo "set-up or model download failed" >&2; exit "$side_rc"; }

stage "derived and tiny reference models"
scripts/derive_models.sh

stage "unit tests"
(cd build && ctest --output-on-failure -j"$(nproc)" --timeout 900)

stage "sanitizer tests (ASan + UBSan)"
mapfile -t fuzz_targets < <(cd tests && ls *_fuzz_test.cpp 2>/dev/null | sed 's/\.cpp$//')
if ((${#fuzz_targets[@]})); then
  scripts/build.sh asan "${fuzz_targets[@]}"
  for t in "${fuzz_targets[@]}"; do
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ./build-asan/"$t" --gtest_brief=1
  done
fi

stage "end-to-end tests"
.venv/bin/python -m pytest -q tests/python
