#!/usr/bin/env bash
# The CUDA backend's check on a lent GPU machine, in one run of at most ~8 minutes (the device
# tool's budget is 15 minutes a session): no network there, and the machine starts bare.
#
#   OUT=/some/dir bash scripts/cuda_device_check.sh      (the device tool sets $OUT)
#
# 1. Records the GPU (nvidia-smi) and uses the binaries scripts/cuda_carry.sh packed
#    (build/cuda-carry.tar.gz, carried to the device) if they start there, else builds `llmserve`
#    and `test_cuda_conformance` with every core (needs cmake, ninja, the toolkit and the
#    packages of scripts/install-deps.sh on that machine).
# 2. Runs the conformance tests (every kernel and the runner against the CPU): conformance.txt
#    and .json; then the kernel timings (GEMV per weight type on 7B/8B-shaped matrices, decode
#    attention, against the device's read bandwidth): kernel-timings.txt.
# 3. Writes random-weight models in real shapes with `llmserve tiny-model --fast-weights` (the
#    0.5B shape first, then Qwen2.5-7B and Llama-3-8B shapes, then the 1.5B while time is left) and runs
#    `bench-model --device cuda` (decode as a fraction of the measured read bandwidth, prefill
#    against the measured bf16 GEMM rate) and `bench-engine --device cuda` (batched generation,
#    1..256 sequences) on them: one JSON file each.
# Every phase has its own time limit, so a hang or a slow phase costs that phase only; the
# summary (summary.txt) lists what ran and how it ended.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-cuda-out}"
mkdir -p "$out"
start=$(date +%s)
summary="$out/summary.txt"
: > "$summary"
note() { printf '%s [%4ds] %s\n' "$(date +%T)" "$(( $(date +%s) - start ))" "$*" | tee -a "$summary"; }
left() { echo $(( ${LLMS_DEVICE_SECONDS:-480} - ($(date +%s) - start) )); }
# phase NAME SECONDS COMMAND...: runs it with a limit, output to $out/NAME.txt.
phase() {
  local name="$1" limit="$2"
  shift 2
  if (( $(left) < 20 )); then note "$name: skipped (time)"; return 1; fi
  (( limit > $(left) - 10 )) && limit=$(( $(left) - 10 ))
  timeout --kill-after=5 "$limit" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  note "$name: exit $rc"
  return $rc
}

nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
note "gpu, memory, driver: $(nvidia-smi --query-gpu=name,memory.total,driver_version \
  --format=csv,noheader 2>/dev/null) (the build needs a driver for CUDA 13.0, R580 or newer)"
# Binaries: the carried ones (scripts/cuda_carry.sh) through their own loader and libraries,
# else a build here.
bin=()
conf=()
if [[ -f build/cuda-carry.tar.gz ]]; then
  carry=$(mktemp -d)
  tar -C "$carry" -xzf build/cuda-carry.tar.gz
  c="$carry/cuda-carry"
  loader=$(ls "$c"/lib/ld-linux-x86-64.so.* 2>/dev/null | head -1)
  # The carried libraries first, then what the machine's own LD_LIBRARY_PATH names (where a
  # container may keep the driver's libcuda).
  libs="$c/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  bin=("$loader" --library-path "$libs" "$c/bin/llmserve")
  conf=("$loader" --library-path "$libs" "$c/bin/test_cuda_conformance")
  if "${bin[@]}" inspect --help > /dev/null 2>&1; then
    note "using the carried binaries"
  else
    note "the carried binaries do not start here"
    bin=()
  fi
fi
if (( ${#bin[@]} == 0 )); then
  phase build 300 bash -c "cmake --preset release > /dev/null && \
    cmake --build --preset release --parallel $(nproc) --target llmserve test_cuda_conformance" ||
    { note "no build: see build.txt"; exit 1; }
  bin=(build/release/src/cli/llmserve)
  conf=(build/release/tests/test_cuda_conformance)
fi
# LLMS_REQUIRE_GPU=1: a GPU the binaries cannot use fails the tests instead of skipping them.
LLMS_REQUIRE_GPU=1 phase conformance 120 "${conf[@]}" --gtest_color=no \
  --gtest_output="json:$out/conformance.json"
LLMS_REQUIRE_GPU=1 LLMS_CUDA_TIMING=1 phase kernel-timings 90 "${conf[@]}" --gtest_color=no \
  --gtest_filter='*KernelTimings*'

# Models outside $OUT: a run cut off mid-shape must not leave gigabytes where results go back.
models=$(mktemp -d)
# name arch layers embd ff heads kv_heads vocab type
# The 0.5B first (quick: it shows the path works end to end), then the 7B / 8B shapes whose
# decode the issue measures against the bandwidth (Q4_K_M and BF16), then the 1.5B while time is
# left: with conformance and the kernel timings taking up to 3 minutes, the last shapes are the
# ones a slow phase skips.
shapes=(
  "qwen0.5b-q8_0 qwen2 24 896 4864 14 2 151936 q8_0"
  "qwen7b-q4_k qwen2 28 3584 18944 28 4 152064 q4_k"
  "qwen7b-bf16 qwen2 28 3584 18944 28 4 152064 bf16"
  "llama8b-q4_k llama 32 4096 14336 32 8 128256 q4_k"
  "qwen1.5b-q4_k qwen2 28 1536 8960 12 2 151936 q4_k"
  "qwen1.5b-bf16 qwen2 28 1536 8960 12 2 151936 bf16"
)
for s in "${shapes[@]}"; do
  read -r name arch layers embd ff heads kv vocab type <<< "$s"
  f="$models/$name.gguf"
  phase "tiny-$name" 150 "${bin[@]}" tiny-model --out "$f" --arch "$arch" --layers "$layers" \
    --embd "$embd" --ff "$ff" --heads "$heads" --kv-heads "$kv" --vocab "$vocab" --ctx 4096 \
    --type "$type" --fast-weights || continue
  phase "bench-model-$name" 90 "${bin[@]}" bench-model -m "$f" --device cuda --prompt 512 --gen 128 \
    -r 2 --bandwidth-mib 4096
  # What batch invariance costs a prompt (every step through the f32 GEMV), on one shape.
  if [[ $name == qwen7b-q4_k ]]; then
    phase "bench-model-$name-batch-invariant" 60 "${bin[@]}" bench-model -m "$f" --device cuda \
      --prompt 512 --gen 16 --bandwidth-mib 1024 --batch-invariant
  fi
  phase "bench-engine-$name" 120 "${bin[@]}" bench-engine -m "$f" --device cuda \
    --concurrency 1,8,16,32,64,128,256 --prompt-len 128 --gen-len 64 --skip-prefix --skip-waste \
    --max-num-seqs 256 --max-num-batched-tokens 4096
  rm -f "$f"
done
rm -rf "$models"
note "done"
