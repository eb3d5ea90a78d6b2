#!/usr/bin/env bash
# Packs what scripts/cuda_device_check.sh needs to run on a lent GPU machine without building
# there: `llmserve` and `test_cuda_conformance` (release, stripped), every shared library they
# load besides the NVIDIA driver's, and this machine's dynamic loader, into one xz tarball
# (build/cuda-carry.tar.xz, well under the device tool's 64 MiB carry limit). The device script
# runs them through the carried loader, so the other machine's glibc does not matter; libcuda
# comes from its driver.
#
#   bash scripts/cuda_carry.sh      then pass carry=["build/cuda-carry.tar.xz"] to the device run
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh release llmserve test_cuda_conformance > /dev/null
stage=build/cuda-carry
rm -rf "$stage" build/cuda-carry.tar.xz
mkdir -p "$stage/bin" "$stage/lib"
for b in build/release/src/cli/llmserve build/release/tests/test_cuda_conformance; do
  cp "$b" "$stage/bin/"
  strip "$stage/bin/$(basename "$b")"
  # Every library the loader resolves (the vDSO has no file).
  ldd "$b" | awk '/=> \// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do
    cp -L "$lib" "$stage/lib/"
  done
done
tar -C build -cJf build/cuda-carry.tar.xz cuda-carry
ls -la build/cuda-carry.tar.xz
