#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian 12 machine (idempotent):
# the Debian -dev packages, and a Python venv (.venv) with the test oracles and real API clients.
# usage: scripts/setup.sh [--packages | --test-clients]   (--packages: the Debian packages only)
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake ninja-build ccache pkg-config git
  libcpp-httplib-dev nlohmann-json3-dev libpcre2-dev libxxhash-dev libzstd-dev libsodium-dev
  libgtest-dev libgmock-dev libbenchmark-dev python3-venv curl zstd libcurl4-openssl-dev libssl-dev libzmq3-dev time)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# --packages: the Debian packages alone (all the build needs; scripts/test.sh builds while the venvs
# below install).
[ "${1:-}" = "--packages" ] && { echo "[setup] packages ok"; exit 0; }

# A venv holding one requirements file, reinstalled when that file changes.
venv() {
  local dir=$1 req=$2
  [ -x "$dir/bin/python" ] || { echo "[setup] creating $dir"; python3 -m venv "$dir"; }
  if ! cmp -s "$req" "$dir/.requirements.installed" 2>/dev/null; then
    echo "[setup] installing $req into $dir"
    "$dir/bin/pip" install -q --upgrade pip >/dev/null
    "$dir/bin/pip" install -q -r "$req"
    cp "$req" "$dir/.requirements.installed"
  fi
}
venv .venv tests/python/requirements.txt
.venv/bin/pip install -q --no-deps -r tests/python/requirements-nodeps.txt
# The test suite's own clients (scripts/test.sh passes --test-clients; the quickstart does not need
# them): agent frameworks and CLIs for tests/python/test_agents.py, and llama.cpp's server tests.
if [ "${1:-}" = "--test-clients" ]; then
  # The agent clients of tests/python/test_agents.py pin other versions of openai/litellm: their own
  # venvs, installed side by side.
  venv .venv-agents tests/python/requirements-agents.txt & agents=$!
  venv .venv-aider tests/python/requirements-aider.txt & aider=$!
  wait $agents
  wait $aider
  # llama.cpp's server API tests (run against rapid-mlx by tests/python/test_llamacpp_suite.py) come
  # from the llama-cpp-python sdist, which vendors llama.cpp; nothing of it enters this repository.
  LCP_DIR="${RAPID_MODEL_CACHE:-$HOME/.cache/rapid-mlx/models}/../llamacpp-tests"
  if [ ! -f "$LCP_DIR/llama_cpp_python-0.3.36.tar.gz" ]; then
    echo "[setup] fetching llama.cpp's server tests (llama-cpp-python 0.3.36 sdist)"
    mkdir -p "$LCP_DIR"
    .venv/bin/pip download -q --no-binary :all: --no-deps llama-cpp-python==0.3.36 -d "$LCP_DIR" ||
      echo "[setup] warning: could not download the sdist; test_llamacpp_suite.py will skip"
  fi
  # llama.cpp itself, built from that sdist into .venv once (~5 min on 2 cores; no multimodal
  # library): the independent reference of the GGUF tests (llama.cpp's greedy and teacher-forced
  # goldens, the Q8_0 copies of scripts/derive_models.sh). Without it those tests would only skip.
  if [ -f "$LCP_DIR/llama_cpp_python-0.3.36.tar.gz" ] && ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
    echo "[setup] building llama-cpp-python 0.3.36 into .venv (the GGUF tests' reference)"
    CMAKE_ARGS="-DLLAVA_BUILD=OFF ${CMAKE_ARGS:-}" .venv/bin/pip install -q "$LCP_DIR/llama_cpp_python-0.3.36.tar.gz"
  fi
fi
echo "[setup] ok"
