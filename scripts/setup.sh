#!/usr/bin/env bash
# Installs what llamaweb needs to build and test on a fresh Debian 12 machine. Idempotent: packages already
# present are not touched, and npm runs only when node_modules does not match package-lock.json.
# Uses the machine's own apt sources and npm configuration (no registry is named here).
set -euo pipefail
cd "$(dirname "$0")/.."

# ---- Debian packages -------------------------------------------------------------------------------------
# gcc + clang (both must build warning-free), cmake/ninja, clang's sanitizer + libFuzzer runtime,
# node + npm (test oracle packages), unicode-data (tokenizer table generator input).
pkgs=(build-essential cmake ninja-build clang libclang-rt-14-dev pkg-config unicode-data)
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- npm packages (llama.cpp's prebuilt libraries, the oracle for quant and model tests) ------------------
stamp=node_modules/.llamaweb-lock
if ! cmp -s package-lock.json "$stamp" 2>/dev/null; then
  echo "setup: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json "$stamp"
fi

# ---- WebGPU backend: Emscripten, CPU Vulkan drivers (lavapipe from backports, SwiftShader), Dawn for Node ---
scripts/setup-webgpu.sh
