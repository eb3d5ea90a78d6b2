#!/usr/bin/env bash
# The main job on the default model, from a bare machine: install dependencies, build, fetch the
# default model (verified by sha256), and run llmserve on it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh release
bin=build/release/src/cli/llmserve
"$bin" pull default
"$bin" inspect default --no-tensors
