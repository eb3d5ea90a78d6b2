#!/usr/bin/env bash
# Packs what scripts/cuda_device_check.sh needs to run on a lent GPU machine without building
# there: `llmserve` and `test_cuda_conformance` (release, stripped), every shared library they
# link, glibc's libdl, libpthread and librt (which the driver's libcuda may name), and this
# machine's dynamic loader, into one gzip tarball (build/cuda-carry.tar.gz, well under the device
# tool's 64 MiB carry limit). The device script runs them through the carried loader, so the
# other machine's glibc does not matter. Not carried: the driver's libcuda (the device's own),
# and cuBLAS (opened at run time, ~600 MB): without it there, prefill runs on the GEMV kernels
# and bench-model's gemm_path says so.
#
#   bash scripts/cuda_carry.sh      then pass carry=["build/cuda-carry.tar.gz"] to the device run
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh release llmserve test_cuda_conformance > /dev/null
stage=build/cuda-carry
rm -rf "$stage" build/cuda-carry.tar.gz
mkdir -p "$stage/bin" "$stage/lib"
for b in build/release/src/cli/llmserve build/release/tests/test_cuda_conformance; do
  cp "$b" "$stage/bin/"
  strip "$stage/bin/$(basename "$b")"
  if ldd "$b" | grep -q "not found"; then
    echo "cuda_carry: $b has libraries ldd cannot find:" >&2
    ldd "$b" | grep "not found" >&2
    exit 1
  fi
  # Every library the loader resolves (the vDSO has no file).
  ldd "$b" | awk '/=> \// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do
    cp -L "$lib" "$stage/lib/"
  done
done
libc_dir=$(dirname "$(ldd build/release/src/cli/llmserve | awk '/libc\.so/ {print $3}')")
for extra in libdl.so.2 libpthread.so.0 librt.so.1; do
  [[ -e "$libc_dir/$extra" ]] && cp -L "$libc_dir/$extra" "$stage/lib/"
done
tar -C build -czf build/cuda-carry.tar.gz cuda-carry
ls -la build/cuda-carry.tar.gz
