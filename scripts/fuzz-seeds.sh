#!/usr/bin/env bash
# Writes the generated seed corpora: tests/fuzz/seeds/model (fuzz-model: one small synthetic model per
# architecture, from tests/fuzz/gen-model-seeds.c). Needs a built library: scripts/build.sh release, or
# LW_BUILD=<dir with libllamaweb.a>.
set -euo pipefail
cd "$(dirname "$0")/.."
lib=${LW_BUILD:-build/release}/libllamaweb.a
[ -f "$lib" ] || { echo "fuzz-seeds: no $lib (scripts/build.sh release first)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O1 -Wall -Wextra -Iinclude -Isrc tests/fuzz/gen-model-seeds.c "$lib" -lm -lpthread -o "$tmp/gen"
mkdir -p tests/fuzz/seeds/model
rm -f tests/fuzz/seeds/model/*.gguf
"$tmp/gen" tests/fuzz/seeds/model
