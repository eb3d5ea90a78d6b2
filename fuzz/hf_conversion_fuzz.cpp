// libFuzzer target for the conversion of a Hugging Face directory to GGUF (model/hf_conversion.h,
// tokenizer/hf_vocab.h): config.json and tokenizer.json come from the input (split at its first
// NUL byte: config before, tokenizer after), the weights are a fixed tiny model (qwen2/llama
// shaped: vocabulary 16, width 8, 2 heads of 4, 1 KV head, feed-forward 16, one layer, f32
// zeros). Hostile JSON must be refused with llms::Error, never crash, hang or ask for an absurd
// allocation (a vocab_size of 2^40, ids far out of range, deep or huge merges).
//
// Checks, beyond "no sanitizer finding", on a directory that converts: the GGUF it gives reads
// back with the GGUF reader, and its hyper-parameters with ModelConfig::from_gguf, or are refused
// with llms::Error; its tensor count is the report's.
// Seeds: fuzz/corpus/hf_conversion_fuzz/ (a qwen2 and a llama directory's config + tokenizer).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/hf_model_dir.h"
#include "model/hf_conversion.h"
#include "model/model_config.h"
#include "util/error.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

struct Tensor {
  const char* name;
  std::vector<uint64_t> shape;
};

// The fixed weights: f32 zeros under Hugging Face names.
std::string tiny_safetensors() {
  const std::vector<Tensor> tensors = {
      {"model.embed_tokens.weight", {16, 8}},
      {"model.norm.weight", {8}},
      {"lm_head.weight", {16, 8}},
      {"model.layers.0.input_layernorm.weight", {8}},
      {"model.layers.0.self_attn.q_proj.weight", {8, 8}},
      {"model.layers.0.self_attn.k_proj.weight", {4, 8}},
      {"model.layers.0.self_attn.v_proj.weight", {4, 8}},
      {"model.layers.0.self_attn.o_proj.weight", {8, 8}},
      {"model.layers.0.post_attention_layernorm.weight", {8}},
      {"model.layers.0.mlp.gate_proj.weight", {16, 8}},
      {"model.layers.0.mlp.up_proj.weight", {16, 8}},
      {"model.layers.0.mlp.down_proj.weight", {8, 16}},
  };
  std::string header = "{";
  uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    uint64_t n = 4;
    std::string shape;
    for (uint64_t d : t.shape) {
      n *= d;
      shape += (shape.empty() ? "" : ",") + std::to_string(d);
    }
    if (header.size() > 1) header += ",";
    header += "\"" + std::string(t.name) + "\":{\"dtype\":\"F32\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + n) +
              "]}";
    offset += n;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::string out(8, '\0');
  const uint64_t n_header = header.size();
  std::memcpy(out.data(), &n_header, 8);
  out += header;
  out.append(offset, '\0');
  return out;
}

void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string pattern = (std::filesystem::temp_directory_path() / "llms-hf-fuzz-XXXXXX").string();
    check(mkdtemp(pattern.data()) != nullptr);
    std::filesystem::path d = pattern;
    write_file(d / "model.safetensors", tiny_safetensors());
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::filesystem::path& dir = scratch_dir();
  write_file(dir / "config.json", input.substr(0, split));
  write_file(dir / "tokenizer.json",
             split == std::string_view::npos ? std::string_view() : input.substr(split + 1));
  try {
    const auto hf = llms::gguf::HfModelDir::open(dir);
    llms::gguf::GgufWriter writer;
    const llms::model::HfConversionReport report = llms::model::add_hf_model(hf, writer);
    const std::vector<uint8_t> bytes = writer.to_bytes();
    check(bytes.size() == report.file_bytes);
    try {
      const auto file = llms::gguf::GgufFile::from_bytes(bytes);
      check(file.tensors().size() == report.n_tensors);
      try {
        (void)llms::model::ModelConfig::from_gguf(file);
      } catch (const llms::Error&) {
        // Hyper-parameters this project refuses to run: a reason, as for any file.
      }
    } catch (const llms::Error&) {
      std::abort();  // our own writer's file must read back
    }
  } catch (const llms::Error&) {
    // Refused with a reason: what a hostile directory must get.
  }
  return 0;
}
