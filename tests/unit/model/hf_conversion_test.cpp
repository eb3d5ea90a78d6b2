// model/hf_conversion against llama.cpp's layout: each tiny random-weight model of
// tests/data/tiny_hf/<case>/ holds its Hugging Face directory and model.gguf, the same weights laid
// out by gguf-py the way llama.cpp's converter lays them out (tools/make_tiny_hf_golden.py: tensor
// names, llama's Q/K permutation, the rope scaling keys and Llama 3's rope_freqs.weight). The
// directory converted here must hold the same tensors (values equal: the weights are bf16-exact)
// and read back into the same hyper-parameters. (tiny_hf_golden_test runs the converted file
// against transformers' logits.) Also: the refusals.
#include "model/hf_conversion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/hf_model_dir.h"
#include "model/model_config.h"
#include "quant/quant.h"
#include "safetensors_bytes.h"
#include "temp_dir.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::model {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

fs::path case_dir(const std::string& name) {
  return fs::path(LLMS_TEST_DATA_DIR) / "tiny_hf" / name;
}

std::vector<uint8_t> convert(const fs::path& dir, HfConversionReport* report = nullptr) {
  gguf::HfModelDir hf = gguf::HfModelDir::open(dir);
  gguf::GgufWriter w;
  HfConversionReport r = add_hf_model(hf, w);
  if (report != nullptr) *report = r;
  return w.to_bytes();
}

std::vector<float> values(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  std::vector<float> out(t.n_elements);
  quant::dequantize_row(t.type, file.tensor_data(t).data(), out.data(),
                        static_cast<int64_t>(t.n_elements));
  return out;
}

class HfConversion : public ::testing::TestWithParam<const char*> {};

TEST_P(HfConversion, SameTensorsAsLlamaCppsLayout) {
  HfConversionReport report;
  const std::vector<uint8_t> bytes = convert(case_dir(GetParam()), &report);
  gguf::GgufFile ours = gguf::GgufFile::from_bytes(bytes);
  gguf::GgufFile want = gguf::GgufFile::open(case_dir(GetParam()) / "model.gguf");

  std::set<std::string> our_names, wanted_names;
  for (const auto& t : ours.tensors()) our_names.insert(t.name);
  for (const auto& t : want.tensors()) wanted_names.insert(t.name);
  EXPECT_EQ(our_names, wanted_names);
  EXPECT_EQ(report.n_tensors, want.tensors().size());
  EXPECT_EQ(report.n_permuted, std::string(GetParam()).starts_with("llama") ? 4u : 0u);
  EXPECT_EQ(report.file_bytes, bytes.size());

  for (const auto& w : want.tensors()) {
    const gguf::TensorInfo* o = ours.find_tensor(w.name);
    if (o == nullptr) continue;
    SCOPED_TRACE(w.name);
    EXPECT_EQ(o->n_dims, w.n_dims);
    EXPECT_EQ(o->ne, w.ne);
    // Matrices keep the directory's bf16; vectors are f32, as llama.cpp writes them.
    EXPECT_EQ(o->type, w.n_dims == 1 ? gguf::GgmlType::kF32 : gguf::GgmlType::kBF16);
    const std::vector<float> a = values(ours, *o);
    const std::vector<float> b = values(want, w);
    ASSERT_EQ(a.size(), b.size());
    if (w.name == "rope_freqs.weight") {
      // Computed in double here and by the generator in Python: equal to float rounding.
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * std::abs(b[i]));
    } else {
      EXPECT_EQ(a, b);
    }
  }
}

TEST_P(HfConversion, SameHyperParametersAsFromTheDirectory) {
  const std::vector<uint8_t> bytes = convert(case_dir(GetParam()));
  gguf::GgufFile file = gguf::GgufFile::from_bytes(bytes);
  const ModelConfig ours = ModelConfig::from_gguf(file);
  const ModelConfig want =
      ModelConfig::from_gguf(gguf::GgufFile::open(case_dir(GetParam()) / "model.gguf"));
  const ModelConfig hf = ModelConfig::from_hf(gguf::HfModelDir::open(case_dir(GetParam())));
  EXPECT_EQ(ours.architecture, want.architecture);
  EXPECT_EQ(ours.n_layers, want.n_layers);
  EXPECT_EQ(ours.n_embd, want.n_embd);
  EXPECT_EQ(ours.n_ff, want.n_ff);
  EXPECT_EQ(ours.n_heads, want.n_heads);
  EXPECT_EQ(ours.n_kv_heads, want.n_kv_heads);
  EXPECT_EQ(ours.head_dim_k, want.head_dim_k);
  EXPECT_EQ(ours.head_dim_v, want.head_dim_v);
  EXPECT_EQ(ours.n_ctx_train, want.n_ctx_train);
  EXPECT_EQ(ours.n_vocab, hf.n_vocab);
  EXPECT_FLOAT_EQ(static_cast<float>(ours.rope_freq_base), static_cast<float>(want.rope_freq_base));
  EXPECT_FLOAT_EQ(static_cast<float>(ours.rms_norm_eps), static_cast<float>(want.rms_norm_eps));
  EXPECT_EQ(ours.rope_scaling_type, want.rope_scaling_type);
  EXPECT_DOUBLE_EQ(ours.rope_scaling_factor, want.rope_scaling_factor);
  EXPECT_EQ(ours.rope_original_context, want.rope_original_context);
  EXPECT_DOUBLE_EQ(ours.rope_yarn_beta_fast, hf.rope_yarn_beta_fast);
  EXPECT_DOUBLE_EQ(ours.rope_yarn_beta_slow, hf.rope_yarn_beta_slow);
  EXPECT_EQ(ours.rope_freq_divisors.size(), want.rope_freq_divisors.size());
  EXPECT_EQ(ours.has_output_weight, want.has_output_weight);
  EXPECT_TRUE(ours.unsupported.empty());
  EXPECT_EQ(file.get_uint("general.file_type"), 32u);  // LLAMA_FTYPE_MOSTLY_BF16

  // The tokenizer the directory carries (tools/make_hf_tokenizer_fixture.py): 128 ids, ids 1
  // and 2 the special BOS and EOS that config.json names.
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  EXPECT_EQ(file.get_strings("tokenizer.ggml.tokens")->size(), 128u);
  EXPECT_EQ(file.get_uint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(file.get_uint("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(tok.encode("hi!", {.add_special = false}), (std::vector<int32_t>{'h', 'i', '!'}));
}

INSTANTIATE_TEST_SUITE_P(Cases, HfConversion,
                         ::testing::Values("llama", "qwen3", "llama-linear", "llama-llama3",
                                           "qwen2-yarn", "qwen3-yarn"),
                         [](const auto& param_info) {
                           std::string s = param_info.param;
                           for (char& ch : s) {
                             if (ch == '-') ch = '_';
                           }
                           return s;
                         });

// A copy of a case directory whose config.json and files a test may change.
class EditedCase {
 public:
  explicit EditedCase(const std::string& name) {
    for (const char* file :
         {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
      fs::copy_file(case_dir(name) / file, dir_.path() / file);
    }
  }
  json config() const {
    std::ifstream in(dir_.path() / "config.json");
    return json::parse(in);
  }
  void set_config(const json& config) const { replace("config.json", config.dump()); }
  void replace(const std::string& file, std::string_view text) const {
    fs::remove(dir_.path() / file);
    dir_.write(file, text);
  }
  void replace(const std::string& file, std::span<const uint8_t> bytes) const {
    fs::remove(dir_.path() / file);
    dir_.write(file, bytes);
  }
  const fs::path& path() const { return dir_.path(); }

 private:
  llms::testing::TempDir dir_;
};

std::string refusal(const fs::path& dir, Error::Kind kind) {
  try {
    convert(dir);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "not refused";
  return {};
}

// The case's safetensors rewritten with `edit` applied to each tensor (name, dtype, data), and
// `extra` tensors appended.
std::vector<uint8_t> rewritten_weights(
    const std::string& name,
    const std::function<void(std::string&, std::string&, std::vector<uint8_t>&)>& edit,
    const std::vector<std::pair<std::string, std::vector<uint64_t>>>& extra = {}) {
  gguf::SafetensorsFile file = gguf::SafetensorsFile::open(case_dir(name) / "model.safetensors");
  llms::testing::SafetensorsBuilder b;
  for (const auto& t : file.tensors()) {
    std::string tensor_name = t.name;
    std::string dtype(gguf::dtype_name(t.dtype));
    std::span<const uint8_t> span = file.tensor_data(t);
    std::vector<uint8_t> data(span.begin(), span.end());
    edit(tensor_name, dtype, data);
    b.add(tensor_name, dtype, t.shape, data);
  }
  for (const auto& [extra_name, shape] : extra) {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    b.add(extra_name, "BF16", shape, std::vector<uint8_t>(n * 2, 0));
  }
  return b.build();
}

TEST(HfConversionRefusal, NamesWhatItCannotConvert) {
  {
    EditedCase c("qwen3");
    json config = c.config();
    config["model_type"] = "phi3";
    c.set_config(config);
    EXPECT_NE(refusal(c.path(), Error::Kind::kUnsupported).find("model_type 'phi3'"),
              std::string::npos);
  }
  {
    EditedCase c("qwen3");
    fs::remove(c.path() / "tokenizer.json");
    EXPECT_NE(refusal(c.path(), Error::Kind::kNotFound).find("tokenizer.json is missing"),
              std::string::npos);
  }
  {
    EditedCase c("qwen3");
    json config = c.config();
    config["num_hidden_layers"] = 3;
    c.set_config(config);
    EXPECT_NE(refusal(c.path(), Error::Kind::kInvalidFile)
                  .find("lack model.layers.2.input_layernorm.weight"),
              std::string::npos);
  }
  {
    EditedCase c("qwen3");
    json config = c.config();
    config["num_hidden_layers"] = 1;
    c.set_config(config);
    EXPECT_NE(refusal(c.path(), Error::Kind::kInvalidFile).find("is in layer 1"),
              std::string::npos);
  }
  {
    EditedCase c("qwen3");
    json config = c.config();
    config["intermediate_size"] = 96;
    c.set_config(config);
    EXPECT_NE(refusal(c.path(), Error::Kind::kInvalidFile)
                  .find("'model.layers.0.mlp.gate_proj.weight' has shape [128, 64] but "
                        "config.json gives [96, 64]"),
              std::string::npos);
  }
  {
    EditedCase c("qwen2-yarn");
    json config = c.config();
    const char* key = config.contains("rope_parameters") ? "rope_parameters" : "rope_scaling";
    config[key]["attention_factor"] = 1.3;
    c.set_config(config);
    EXPECT_NE(refusal(c.path(), Error::Kind::kUnsupported).find("attention_factor"),
              std::string::npos);
  }
  {
    EditedCase c("qwen3");
    c.replace("model.safetensors",
              rewritten_weights("qwen3", [](auto&, auto&, auto&) {},
                                {{"model.layers.0.mlp.experts.0.weight", {4, 4}}}));
    EXPECT_NE(refusal(c.path(), Error::Kind::kUnsupported)
                  .find("'model.layers.0.mlp.experts.0.weight' has no GGUF name"),
              std::string::npos);
  }
  {
    EditedCase c("qwen3");
    c.replace("model.safetensors",
              rewritten_weights("qwen3", [](std::string& name, std::string& dtype, auto&) {
                // I16 has bf16's width, so the file itself stays well formed.
                if (name == "model.layers.1.self_attn.v_proj.weight") dtype = "I16";
              }));
    EXPECT_NE(refusal(c.path(), Error::Kind::kUnsupported)
                  .find("'model.layers.1.self_attn.v_proj.weight' is I16"),
              std::string::npos);
  }
  {
    EditedCase c("qwen3");
    c.replace("model.safetensors", rewritten_weights("qwen3", [](std::string& name, auto&, auto&) {
                if (name == "lm_head.weight") name = "lm_head.unused";
              }));
    EXPECT_NE(refusal(c.path(), Error::Kind::kUnsupported).find("'lm_head.unused'"),
              std::string::npos);
  }
}

TEST(HfConversionRefusal, HostileNumbersAndNames) {
  for (const char* bad_name : {"model.layers.00.input_layernorm.weight",
                               "model.layers.99999999999999999999.input_layernorm.weight",
                               "model.layers.x.input_layernorm.weight"}) {
    SCOPED_TRACE(bad_name);
    EditedCase c("qwen3");
    c.replace("model.safetensors", rewritten_weights("qwen3", [&](std::string& name, auto&, auto&) {
                if (name == "model.layers.0.input_layernorm.weight") name = bad_name;
              }));
    EXPECT_NE(refusal(c.path(), Error::Kind::kUnsupported).find("has no GGUF name"),
              std::string::npos);
  }
  {
    EditedCase c("qwen3");
    json config = c.config();
    config["max_position_embeddings"] = 4294967296ULL;
    c.set_config(config);
    EXPECT_NE(refusal(c.path(), Error::Kind::kInvalidFile)
                  .find("max_position_embeddings = 4294967296 does not fit GGUF's 32-bit key"),
              std::string::npos);
  }
  {
    EditedCase c("qwen2-yarn");
    json config = c.config();
    config["use_sliding_window"] = true;
    config["sliding_window"] = 16;
    c.set_config(config);
    EXPECT_NE(refusal(c.path(), Error::Kind::kUnsupported).find("sliding-window"),
              std::string::npos);
  }
  {
    // Llama 3 scaling whose two factors meet: no usable frequencies, refused before any tensor.
    EditedCase c("llama-llama3");
    json config = c.config();
    const char* key = config.contains("rope_parameters") ? "rope_parameters" : "rope_scaling";
    config[key]["high_freq_factor"] = config[key]["low_freq_factor"];
    c.set_config(config);
    try {
      convert(c.path());
      ADD_FAILURE() << "not refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("RoPE"), std::string::npos) << e.what();
    }
  }
}

TEST(HfConversionRefusal, UntiedWithoutOutputMatrixIsRefusedTiedDropsIt) {
  EditedCase c("qwen3");
  c.replace("model.safetensors", rewritten_weights("qwen3", [](std::string& name, auto&, auto&) {
              if (name == "lm_head.weight") name = "model.layers.0.self_attn.rotary_emb.inv_freq";
            }));
  EXPECT_NE(refusal(c.path(), Error::Kind::kInvalidFile).find("lack lm_head.weight"),
            std::string::npos);
  json config = c.config();
  config["tie_word_embeddings"] = true;
  c.set_config(config);
  const std::vector<uint8_t> bytes = convert(c.path());
  gguf::GgufFile file = gguf::GgufFile::from_bytes(bytes);
  EXPECT_EQ(file.find_tensor("output.weight"), nullptr);
  EXPECT_NE(file.find_tensor("token_embd.weight"), nullptr);
  EXPECT_FALSE(ModelConfig::from_gguf(file).has_output_weight);
}

}  // namespace
}  // namespace llms::model
