// model/hf_conversion: a Hugging Face model directory (config.json, safetensors, tokenizer.json)
// as a GGUF file laid out the way llama.cpp's converter lays it out, so that this project, the
// quantizer and llama.cpp all read it.
//
// Contract: add_hf_model() fills an empty GgufWriter with
//   - metadata: general.architecture / name / file_type, the `<arch>.*` hyper-parameters that
//     ModelConfig::from_gguf reads back into the ModelConfig that ModelConfig::from_hf reads from
//     config.json (RoPE scaling as `<arch>.rope.scaling.*` keys, Llama 3 scaling as the per-pair
//     divisors of the F32 tensor rope_freqs.weight), and the tokenizer (tokenizer/hf_vocab.h);
//   - tensors under GGUF names, each of the directory's tensors exactly once: matrices in their
//     stored type (F32, F16 or BF16), as views into the directory's mapping, so `dir` must outlive
//     the writer's write(); vectors (norms, biases) in F32, as llama.cpp writes them; llama's
//     (and mistral's) q and k rows permuted from Hugging Face's rotate-halves order into GGUF's
//     adjacent pairs. The order: token_embd, rope_freqs, blk.0 .. blk.N-1, output_norm, output.
// Architectures: llama (and mistral), qwen2, qwen3. Everything else is refused before a tensor is
// added, with llms::Error naming the file and what is wrong: another model_type or a feature the
// forward pass does not run (kUnsupported), a tensor that maps to no GGUF name, a tensor of a
// dtype other than F32/F16/BF16, a layer missing one of its weights or holding one twice, a
// declared-untied model without lm_head.weight, a shape that does not fit config.json, a
// hyper-parameter over GGUF's 32-bit keys, RoPE parameters that give no usable frequencies, or a
// sliding window (which GGUF's llama/qwen keys cannot carry) (kInvalidFile / kUnsupported).
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf_writer.h"
#include "gguf/hf_model_dir.h"

namespace llms::model {

struct HfConversionReport {
  std::string architecture;  // the GGUF name ("llama", "qwen2", "qwen3")
  size_t n_tensors = 0;
  size_t n_permuted = 0;  // q/k tensors reordered (llama)
  uint64_t file_bytes = 0;
};

HfConversionReport add_hf_model(const gguf::HfModelDir& dir, gguf::GgufWriter& writer);

}  // namespace llms::model
