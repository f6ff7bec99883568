#!/usr/bin/env bash
# The benchmark against the peers, from a clean checkout: builds rapid-mlx if needed, fetches the
# model, installs the peers (llama.cpp's server via llama-cpp-python, which compiles llama.cpp once,
# ~15 min; mlx-lm on MLX's CPU backend) into .venv-bench once, then runs bench/harness.
#   bench/run.sh                 full run, all engines (results in bench/results/<time>/)
#   bench/run.sh --quick         < 3 min smoke run, rapid-mlx alone, installs nothing
#   bench/run.sh --engines llama.cpp,mlx-lm --models smollm2-135m --workloads single,concurrency
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-bench
# Pinned: the versions this harness was written against; bump together with a re-run.
PEERS=("llama-cpp-python[server]==0.3.36" "mlx[cpu]==0.32.4" "mlx-lm==0.32.2" "matplotlib" "gguf" "safetensors")

quick=0
for arg in "$@"; do [ "$arg" = "--quick" ] && quick=1; done

# $RAPID_MLX_BIN: benchmark that binary instead of building build/rapid-mlx.
if [ -z "${RAPID_MLX_BIN:-}" ] && ! { [ -x build/rapid-mlx ] && build/rapid-mlx --help 2>&1 | grep -qw serve; }; then
  scripts/setup.sh
  scripts/build.sh release rapid-mlx
fi
export RAPID_MLX_BIN=${RAPID_MLX_BIN:-$PWD/build/rapid-mlx}
scripts/fetch_models.sh

if [ "$quick" = 0 ] && ! printf '%s\n' "${PEERS[@]}" | cmp -s - "$VENV/.installed" 2>/dev/null; then
  echo "[bench] installing the peers into $VENV (first time: llama.cpp compiles, ~15 min)"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "${PEERS[@]}"
  printf '%s\n' "${PEERS[@]}" > "$VENV/.installed"
fi

PY=$PWD/$VENV/bin/python
[ -x "$PY" ] || PY=python3  # --quick on a machine without the peers: the harness is stdlib-only
cd bench
exec "$PY" -m harness "$@"
