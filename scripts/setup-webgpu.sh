#!/usr/bin/env bash
# Installs what the WebGPU backend needs to build (Emscripten) and to run its kernels without a GPU:
#   - emscripten (Debian 3.1.6): the wasm build of libllamaweb + src/webgpu (scripts/build-wasm.sh)
#   - mesa-vulkan-drivers from bookworm-backports (lavapipe 25.x; Debian 12's stock 22.3 is rejected by Dawn)
#   - chromium (its bundled SwiftShader Vulkan ICD: a second, f16-less CPU adapter; also headless browser)
#   - npm `webgpu` (Dawn for Node), pinned in package.json
# Idempotent: nothing is installed twice, apt sources are only added once. No registry host is named here:
# the backports suite reuses the mirror this machine's own apt sources already use.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")

# ---- bookworm-backports source, derived from the machine's own mirror ------------------------------------
if ! grep -rqs -- "${codename}-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  src=/etc/apt/sources.list.d/debian.sources
  if [ -f "$src" ]; then
    # First deb822 stanza whose Suites list contains the plain codename (the main archive, not security).
    stanza=$(awk -v c="$codename" 'BEGIN{RS="";FS="\n"} { for(i=1;i<=NF;i++) if ($i ~ "^Suites:" && (" " $i " ") ~ (" " c " ")) { print; exit } }' "$src")
    uris=$(printf '%s\n' "$stanza" | sed -n 's/^URIs:[[:space:]]*//p' | head -1)
    signed=$(printf '%s\n' "$stanza" | sed -n 's/^Signed-By:[[:space:]]*//p' | head -1)
  else
    # one-line format: reuse the URI of the first "deb <uri> <codename> ..." line
    uris=$(awk -v c="$codename" '$1=="deb" && $3==c {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    signed=""
  fi
  if [ -z "${uris:-}" ]; then
    echo "setup-webgpu: cannot derive a Debian mirror from this machine's apt sources" >&2
    exit 1
  fi
  {
    echo "Types: deb"
    echo "URIs: $uris"
    echo "Suites: ${codename}-backports"
    echo "Components: main"
    [ -n "$signed" ] && echo "Signed-By: $signed"
  } | $SUDO tee /etc/apt/sources.list.d/llamaweb-backports.sources >/dev/null
  echo "setup-webgpu: added ${codename}-backports from $uris"
  $SUDO apt-get update -qq
fi

# ---- Debian packages -----------------------------------------------------------------------------------
need=()
installed emscripten || need+=(emscripten)
installed chromium || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup-webgpu: installing ${need[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# lavapipe: the backports version (>= 25) is what Dawn accepts
mesa_ver=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)
if [ -z "$mesa_ver" ] || dpkg --compare-versions "$mesa_ver" lt 24; then
  echo "setup-webgpu: installing mesa-vulkan-drivers from ${codename}-backports"
  $SUDO apt-get install -y -qq --no-install-recommends -t "${codename}-backports" mesa-vulkan-drivers >/dev/null
fi

# ---- npm: Dawn for Node (pinned in package.json; installed by npm ci) ------------------------------------
if [ ! -f node_modules/webgpu/package.json ]; then
  if grep -q '"webgpu"' package.json; then
    npm ci --no-audit --no-fund --loglevel=error
  else
    echo "setup-webgpu: package.json lacks the webgpu package (npm install -E --save-dev webgpu@0.6.2)" >&2
    exit 1
  fi
fi
echo "setup-webgpu: ok (emcc $(NODE_PATH=/usr/share/nodejs emcc --version 2>/dev/null | head -1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+'), mesa $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers))"
