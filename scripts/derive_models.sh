#!/usr/bin/env bash
# Derives float and MLX-quantized copies of the fetched GGUF models with `rapid-mlx convert`
# (run after the build; scripts/fetch_models.sh must have run first). Idempotent:
#   smollm2-135m-instruct/hf-f32/    HF safetensors, f32, dequantized from the Q4_1 GGUF
#   smollm2-135m-instruct/mlx-q4/    MLX affine 4-bit (group 64), bf16 scales/norms (mlx_lm layout)
#   smollm2-135m-instruct/mlx-q8/    MLX affine 8-bit (group 64)
#   smollm2-135m-instruct/*.Q8_0.gguf, qwen35-tiny/*/gguf-q8_0/    with llama-cpp-python only
#   qwen35-tiny/                     tiny Qwen3.5 models, their GGUF copies and llama.cpp goldens
#   moe-gguf-tiny/, qwen3next-gguf-tiny/, gpt-oss-gguf-tiny/
#                                    tiny MoE GGUFs (qwen3moe, qwen35moe, qwen3next, gpt-oss), goldens
# A GGUF source's tokenizer travels as tokenizer.gguf (hard link when possible).
# usage: scripts/derive_models.sh [path/to/rapid-mlx]   (default: build/rapid-mlx or $RAPID_BIN)
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${RAPID_MODEL_CACHE:-$HOME/.cache/rapid-mlx/models}
BIN=${1:-${RAPID_BIN:-build/rapid-mlx}}
if [ ! -x "$BIN" ]; then
  echo "[derive] $BIN not built; skipping (build first, then re-run)" >&2
  exit 0
fi

derive() {  # source, destination dir, convert options...
  local src=$1 dst=$2; shift 2
  [ -s "$dst/model.safetensors" ] && [ -s "$dst/config.json" ] && return 0
  if [ ! -e "$src" ]; then
    echo "[derive] missing $src (run scripts/fetch_models.sh)" >&2
    return 0
  fi
  rm -rf "$dst.tmp"
  "$BIN" convert --from "$src" --to "$dst.tmp" "$@"
  rm -rf "$dst"
  mv "$dst.tmp" "$dst"
}

S=$CACHE/smollm2-135m-instruct
derive "$S/SmolLM2-135M-Instruct.Q4_1.gguf" "$S/hf-f32" --dtype f32
derive "$S/hf-f32" "$S/mlx-q4" --quantize 4 --group-size 64 --dtype bf16
derive "$S/hf-f32" "$S/mlx-q8" --quantize 8 --group-size 64 --dtype bf16
echo "[derive] ok: $S/{hf-f32,mlx-q4,mlx-q8}"

# The python with llama-cpp-python, if any: .venv-oracle, or the test venv when it was installed
# there (from a wheel built once from the sdist, see bench/README.md).
ORACLE=
for py in .venv-oracle/bin/python .venv/bin/python; do
  if [ -x "$py" ] && "$py" -c "import llama_cpp" 2>/dev/null; then ORACLE=$py; break; fi
done

# Q8_0 GGUF of SmolLM2 (for bench/decode.sh), requantized by llama.cpp itself from the Q4_1 GGUF
# (llama_model_quantize with allow_requantize dequantizes to f32 first; hf-f32 above is that same
# f32 model). Needs llama-cpp-python ($ORACLE); skipped without it.
Q8=$S/SmolLM2-135M-Instruct.Q8_0.gguf
if [ ! -s "$Q8" ] && [ -e "$S/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
  if [ -n "$ORACLE" ]; then
    "$ORACLE" - "$S/SmolLM2-135M-Instruct.Q4_1.gguf" "$Q8.tmp" <<'PY'
import sys, llama_cpp
p = llama_cpp.llama_model_quantize_default_params()
p.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
p.allow_requantize = True
p.nthread = 2
rc = llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), p)
sys.exit(rc)
PY
    mv "$Q8.tmp" "$Q8"
    echo "[derive] ok: $Q8"
  else
    echo "[derive] no venv with llama_cpp; skipping $Q8" >&2
  fi
fi

# The tiny Qwen3.5 models (mlx-lm, in .venv) and their GGUF copies: f32 always, the Q8_0 copies and
# llama.cpp's goldens (greedy, teacher-forced) when .venv has llama_cpp. Made here, once, because
# ctest runs each test case in its own process in parallel, and cases that found the set missing
# would each generate it at the same time.
Q35=$CACHE/qwen35-tiny
if .venv/bin/python -c "import mlx_lm" 2>/dev/null; then
  [ -e "$Q35/vheads-untied/mlx-q4/greedy.json" ] || .venv/bin/python scripts/make_tiny_qwen35.py "$Q35" >/dev/null
  # Not fatal, as below: without the sdist's gguf-py the GGUF tests skip, saying why.
  .venv/bin/python scripts/qwen35_gguf.py "$Q35" || echo "[derive] scripts/qwen35_gguf.py failed; $Q35 GGUF copies not (fully) written" >&2
else
  echo "[derive] no mlx_lm in .venv; the tiny Qwen3.5 set is left to the tests" >&2
fi

# Issue 20: the tiny qwen3moe GGUFs (f32, Q8_0) of scripts/moe_gguf.py with mlx-lm's goldens, and
# llama.cpp's greedy goldens on the f32 file when .venv has llama-cpp-python (added on a re-run
# once it is installed; everything already written is kept).
if .venv/bin/python -c "import mlx_lm" 2>/dev/null; then
  # Not fatal: gguf-py comes from the llama-cpp-python sdist (a download); without it the tests
  # generate the set on first use or skip, saying why.
  if .venv/bin/python scripts/moe_gguf.py "$CACHE/moe-gguf-tiny" > /dev/null; then
    echo "[derive] ok: $CACHE/moe-gguf-tiny"
  else
    echo "[derive] scripts/moe_gguf.py failed; $CACHE/moe-gguf-tiny not (fully) written" >&2
  fi
else
  echo "[derive] no mlx-lm in .venv; skipping $CACHE/moe-gguf-tiny" >&2
fi

# Issues 17/20: the tiny qwen3next and gpt-oss GGUFs (f32, Q8_0) of scripts/qwen3next_gguf.py and
# scripts/gpt_oss_gguf.py with mlx-lm's goldens and llama.cpp's greedy goldens on the f32 files
# (when .venv has llama-cpp-python). About a minute each on 2 cores.
for pair in qwen3next_gguf.py:qwen3next-gguf-tiny gpt_oss_gguf.py:gpt-oss-gguf-tiny; do
  script=${pair%%:*} set=$CACHE/${pair#*:}
  if ! .venv/bin/python -c "import mlx_lm" 2>/dev/null; then
    echo "[derive] no mlx-lm in .venv; skipping $set" >&2
  elif .venv/bin/python "scripts/$script" "$set" > /dev/null; then
    echo "[derive] ok: $set"
  else
    echo "[derive] scripts/$script failed; $set not (fully) written" >&2
  fi
done
