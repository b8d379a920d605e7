#!/usr/bin/env bash
# Tokenizer speed, llamaweb vs llama.cpp, on 1 MB of mixed-language text (llama.cpp's tokenizer test inputs
# from ../shared/vocab — many scripts, emoji, whitespace runs — interleaved with this repository's own C and
# Markdown, repeated to 1 MiB), for every vocab in ../shared/vocab. One thread, best of 3, ids compared.
#   bench/tokenize-speed.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${LW_SHARED:-../shared}
[ -d "$shared/vocab" ] || { echo "SKIP: $shared/vocab is absent"; exit 0; }
scripts/build.sh release >/dev/null
out=build/bench-tok
mkdir -p "$out"
cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Iinclude -Isrc -Itests bench/tokenize-speed.c \
   build/release/libllamaweb.a -ldl -lm -lpthread -o "$out/tokenize-speed"
text="$out/mixed-1mb.txt"
if [ ! -s "$text" ]; then
  # the loop ends when head has its 1 MiB and cat dies of SIGPIPE
  { while cat "$shared"/vocab/*.inp README.md src/tokenizer/*.c src/chat/*.c; do :; done; } 2>/dev/null |
    head -c 1048576 > "$text" || true
fi
echo "| vocab | bytes | tokens | llama.cpp ms | llamaweb ms | speed-up | ids |"
echo "|---|---|---|---|---|---|---|"
for v in "$shared"/vocab/ggml-vocab-*.gguf; do
  "$out/tokenize-speed" "$v" "$text" "${1:-3}" || true
done
