#!/usr/bin/env bash
# Issue #3's speed table (rapid-mlx vs llama.cpp, 1 and 2 threads, prefill / decode tok/s, ratios,
# fraction of the DRAM read-bandwidth bound): see bench/core_table.py for the method and options.
# usage: bench/core_table.sh [--bin build/rapid-mlx] [--threads 1,2] [--reps 3] [--quick] [--json OUT] [GGUF...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/core_table.py "$@"
