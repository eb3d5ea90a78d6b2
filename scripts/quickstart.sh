#!/usr/bin/env bash
# The main job on the default model, from a bare machine: install dependencies, build the
# llmserve binary (only that target and the libraries it links, not the tests: scripts/test.sh
# builds everything), fetch the default model (verified by sha256), and run llmserve on it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh release llmserve
bin=build/release/src/cli/llmserve
"$bin" pull default
"$bin" inspect default --no-tensors --ctx 4096 | sed -n '1,3p;/^KV cache/,$p'
"$bin" run -m default --chat -p "Write a Python function that checks whether a number is prime." -n 128
