#!/usr/bin/env bash
# The main job: installs deps, builds the llamaweb CLI, describes a model and generates text with it on CPU.
#   scripts/demo.sh [MODEL.gguf] [PROMPT] [N_TOKENS]
# Defaults: ../shared/models/stories260K.gguf, "Once upon a time", 64 tokens, greedy (as llama.cpp would).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release >/dev/null
model=${1:-../shared/models/stories260K.gguf}
prompt=${2:-Once upon a time}
n=${3:-64}
build/release/llamaweb info "$model" | sed -n '1,/^$/p'
exec build/release/llamaweb run -m "$model" -p "$prompt" -n "$n" --temp 0
