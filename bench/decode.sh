#!/usr/bin/env bash
# Decode / prefill speed of rapid-mlx vs llama.cpp on the SmolLM2 GGUF, with the DRAM read
# bandwidth bound. Wall-clock and per-CPU-second rates are both printed: on a shared machine the
# latter is the fair comparison of kernels.
# usage: bench/decode.sh [GGUF] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
gguf=${1:-$HOME/.cache/rapid-mlx/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf}
build=${2:-build-core}
if ! cmake --build "$build" --target compute_bench >/dev/null 2>&1; then
  [ -x "$build/compute_bench" ] || { echo "cannot build $build/compute_bench" >&2; exit 1; }
  echo "warning: rebuilding compute_bench failed; using the existing $build/compute_bench" >&2
fi
g++ -O3 -march=native -pthread bench/stream_probe.cpp -o "$build/stream_probe"
echo "== DRAM read bandwidth"; "$build/stream_probe" 256 2; echo
echo "== weights streamed per decoded token: $(stat -c %s "$gguf") bytes (whole GGUF; embedding = tied output)"
echo "== rapid-mlx (128-token prefill, 64 decode steps; tok/s counter = wall clock; CPU column = main thread)"
RAPID_SMOLLM2_GGUF="$gguf" "$build/compute_bench" --benchmark_filter=SmolLM2
if [ -x .venv-oracle/bin/python ] && .venv-oracle/bin/python -c "import llama_cpp" 2>/dev/null; then
  echo "== llama.cpp (llama-cpp-python)"
  for t in 1 2; do .venv-oracle/bin/python bench/decode_bench.py "$gguf" "$t"; done
fi
