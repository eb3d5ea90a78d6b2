#!/usr/bin/env bash
# Checks the AVX-512 matmul tiles on any x86-64 with AVX2 by emulating AVX-512 with SIMDe.
# Usage: tests/unit/kernels/avx512_emulation/run.sh <release build dir with llms_quant built>
# Needs: apt-get install libsimde-dev. Exits non-zero on any mismatch.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
build="$(cd "${1:?build dir}" && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
src="$root/src"
flags=(-std=c++20 -O1 -mavx2 -mfma -mf16c -Wno-psabi -I"$src/kernels" -I"$src/kernels/include"
       -I"$src/quant/include" -I"$src/gguf/include" -I"$src/util/include")
for f in matmul_legacy_avx512 matmul_kquant_avx512; do
  g++ "${flags[@]}" -include "$here/simde_shim.h" -c "$src/kernels/$f.cpp" -o "$out/$f.o"
done
for f in matmul_scalar act_quant act_quant_avx2 cpu_features; do
  g++ "${flags[@]}" -c "$src/kernels/$f.cpp" -o "$out/$f.o"
done
g++ "${flags[@]}" -x c++ -c "$here/harness.cc" -o "$out/harness.o"
g++ "$out"/*.o "$build/src/quant/libllms_quant.a" "$build/src/gguf/libllms_gguf.a" \
    "$build/src/util/libllms_util.a" -o "$out/harness"
if objdump -d "$out"/matmul_*avx512.o | grep -q zmm; then
  echo "emulated objects contain real AVX-512 instructions" >&2
  exit 1
fi
"$out/harness"
