#!/usr/bin/env bash
# Configures and builds one CMake preset (release, debug, asan).
# Usage: scripts/build.sh [preset [target...]]
#   no target: everything (every library, the llmserve binary, every test and fuzz target);
#   targets:   only those and what they need, e.g. `scripts/build.sh release llmserve` builds the
#              binary without the tests (`cmake --build --preset release --target llmserve`).
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
shift $(( $# > 0 ? 1 : 0 ))
cmake --preset "$preset" >/dev/null
if (( $# > 0 )); then
  cmake --build --preset "$preset" --target "$@"
else
  cmake --build --preset "$preset"
fi
