#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, build, unit tests (ctest), the fuzz and
# loader-robustness tests again under AddressSanitizer + UBSan, then the Python end-to-end tests
# (real openai/anthropic SDKs against the real server, HF tokenizers and jinja2 as oracles).
set -euo pipefail
cd "$(dirname "$0")/.."
export RAPID_MODEL_CACHE=${RAPID_MODEL_CACHE:-$HOME/.cache/rapid-mlx/models}

scripts/setup.sh --test-clients
scripts/fetch_models.sh
scripts/build.sh release
scripts/derive_models.sh

echo "== unit tests"
(cd build && ctest --output-on-failure -j"$(nproc)" --timeout 900)

echo "== sanitizer tests (ASan + UBSan)"
mapfile -t fuzz_targets < <(cd tests && ls *_fuzz_test.cpp 2>/dev/null | sed 's/\.cpp$//')
if ((${#fuzz_targets[@]})); then
  scripts/build.sh asan "${fuzz_targets[@]}"
  for t in "${fuzz_targets[@]}"; do
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ./build-asan/"$t" --gtest_brief=1
  done
fi

echo "== end-to-end tests"
.venv/bin/python -m pytest -q tests/python
