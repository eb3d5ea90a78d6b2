#!/bin/bash
# Cross-checks `llmserve quantize` and `llmserve imatrix` against llama.cpp (a peer built in a
# scratch place, e.g. from the llama-cpp-python sdist's vendor/llama.cpp: cmake -DGGML_NATIVE=ON,
# targets llama-perplexity llama-imatrix llama-quantize). Nothing here becomes part of the product.
#
#   tools/llama_cpp_crosscheck.sh LLAMA_BIN_DIR F16_MODEL TEXT CALIBRATION_TEXT OUT_DIR [TYPE...]
#
# For each TYPE (default: q8_0 q5_0 q4_k_m): our round-to-nearest file, then the perplexity
# (ctx 512) both engines give it; a file llama.cpp fails to load shows rc != 0. Then the
# importance matrices: both tools over the first 4 chunks of CALIBRATION_TEXT, each quantizer
# reading the other's file, and (with gguf-py) the two matrices compared. Prints one line per
# check; needs python3 for our JSON.
set -u
if [ $# -lt 5 ]; then
  sed -n '2,12p' "$0"
  exit 2
fi
bin=$1
f16=$2
text=$3
calibration=$4
out=$5
shift 5
types=("$@")
[ ${#types[@]} -eq 0 ] && types=(q8_0 q5_0 q4_k_m)
here=$(cd "$(dirname "$0")/.." && pwd)
llmserve=${LLMSERVE:-$here/build/release/src/cli/llmserve}
mkdir -p "$out"

ours_ppl() {
  "$llmserve" perplexity -m "$1" -f "$text" --ctx 512 --json 2>/dev/null |
    python3 -c "import json, sys; print('%.4f' % json.load(sys.stdin)['ppl'])"
}
llama_ppl() {
  "$bin/llama-perplexity" -m "$1" -f "$text" -c 512 -t 2 > "$1.llama.log" 2>&1
  local rc=$?
  echo "$(grep -o 'Final estimate: PPL = [0-9.]*' "$1.llama.log" | awk '{print $5}') rc=$rc"
}

for type in "${types[@]}"; do
  file=$out/$type.gguf
  "$llmserve" quantize "$f16" "$file" --type "$type" --force > /dev/null 2>&1 || {
    echo "$type: llmserve quantize failed"
    continue
  }
  echo "$type: ours $(ours_ppl "$file")  llama.cpp $(llama_ppl "$file")"
done

head -c 40000 "$calibration" > "$out/calibration-4.txt"
"$bin/llama-imatrix" -m "$f16" -f "$out/calibration-4.txt" -c 512 --chunks 4 -t 2 \
  -o "$out/llama.imatrix" > "$out/llama-imatrix.log" 2>&1
echo "llama-imatrix rc=$?"
"$llmserve" imatrix -m "$f16" -f "$out/calibration-4.txt" --ctx 512 --chunks 4 \
  -o "$out/ours.imatrix" --force > "$out/ours-imatrix.log" 2>&1
echo "llmserve imatrix rc=$?"
"$llmserve" quantize "$f16" "$out/ours-with-llama-imatrix.gguf" --type q4_0 \
  --imatrix "$out/llama.imatrix" --force 2>&1 | grep '^imatrix'
"$bin/llama-quantize" --imatrix "$out/ours.imatrix" "$f16" "$out/llama-with-our-imatrix.gguf" \
  Q4_0 2 > "$out/llama-quantize.log" 2>&1
echo "llama-quantize rc=$? $(grep -o 'loaded [0-9]* importance matrix entries' "$out/llama-quantize.log")"
# The two matrices side by side (needs gguf-py: PYTHON=a python with `gguf` and numpy).
"${PYTHON:-python3}" - "$out/llama.imatrix" "$out/ours.imatrix" <<'PY' || echo "imatrix comparison skipped (no gguf-py)"
import sys
import gguf
import numpy as np
llama, ours = ({t.name: t for t in gguf.GGUFReader(p).tensors} for p in sys.argv[1:3])
print(f"imatrix entries: llama.cpp {len(llama) // 2}, ours {len(ours) // 2}, "
      f"names differ: {sorted(set(llama) ^ set(ours))[:4]}")
def mean_squares(tensors, name):
    base = name[: -len(".in_sum2")]
    return np.asarray(tensors[name].data, np.float64).ravel() / float(
        np.asarray(tensors[base + ".counts"].data).ravel()[0])
diffs = [np.linalg.norm(mean_squares(llama, n) - mean_squares(ours, n)) /
         np.linalg.norm(mean_squares(llama, n))
         for n in sorted(set(llama) & set(ours)) if n.endswith(".in_sum2")]
print(f"mean squared activations, relative L2 difference: median {np.median(diffs):.2e}, "
      f"max {max(diffs):.2e}")
PY
