#!/usr/bin/env bash
# The main job: builds the llamaweb CLI and describes a model (default: ../shared/models/stories260K.gguf).
#   scripts/demo.sh [FILE.gguf] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release >/dev/null
model=${1:-../shared/models/stories260K.gguf}
shift || true
exec build/release/llamaweb info "$model" "$@"
