#!/usr/bin/env bash
# The whole test suite, as CI runs it: install dependencies, fetch the registered models, then
# build and run every test (labels unit, model, fuzz) in the release build and again in the
# ASan+UBSan build (which also runs each libFuzzer target for LLMS_FUZZ_SECONDS, default 30).
# Fails on the first failing stage.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${LLMS_TEST_JOBS:-2}"

stage() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }

stage "dependencies"
bash scripts/install-deps.sh

stage "models"
python3 scripts/pull_model.py --all

stage "release build"
bash scripts/build.sh release
stage "release tests"
ctest --preset release -j "$jobs" --timeout 900

stage "asan+ubsan build"
bash scripts/build.sh asan
stage "asan+ubsan tests (including fuzz runs)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --preset asan -j "$jobs" --timeout 1800

stage "done"
