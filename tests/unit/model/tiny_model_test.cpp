#include "model/tiny_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "gguf/gguf_file.h"
#include "kv/step_batch.h"
#include "model/kv_storage.h"
#include "model/model_config.h"
#include "model/transformer.h"
#include "quant/quant.h"
#include "temp_dir.h"
#include "util/error.h"

namespace llms::model {
namespace {

using gguf::GgmlType;
using ::testing::HasSubstr;

gguf::GgufFile build_and_read(const TinyModelSpec& spec) {
  return gguf::GgufFile::from_bytes(build_tiny_model(spec).to_bytes());
}

TEST(TinyModel, EveryArchitectureReadsBackWithItsShape) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma3"}) {
    SCOPED_TRACE(arch);
    TinyModelSpec spec;
    spec.architecture = arch;
    spec.n_layers = 6;
    if (std::string(arch) == "gemma3") spec.tokenizer = TinyTokenizerKind::kSentencePieceLike;
    auto file = build_and_read(spec);
    auto cfg = ModelConfig::from_gguf(file);
    EXPECT_EQ(cfg.architecture, arch);
    EXPECT_EQ(cfg.n_layers, 6u);
    EXPECT_EQ(cfg.n_embd, 64u);
    EXPECT_EQ(cfg.n_heads, 4u);
    EXPECT_EQ(cfg.max_kv_heads(), 2u);
    EXPECT_EQ(cfg.head_dim_k, 16u);
    auto vocab = make_tiny_vocabulary(spec.tokenizer);
    EXPECT_EQ(cfg.n_vocab, vocab.tokens.size());
    const auto* embd = file.find_tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->ne[0], 64u);
    EXPECT_EQ(embd->ne[1], vocab.tokens.size());
    EXPECT_EQ(file.find_tensor("blk.0.attn_q.bias") != nullptr, std::string(arch) == "qwen2");
    EXPECT_EQ(file.find_tensor("blk.5.attn_k_norm.weight") != nullptr,
              std::string(arch) == "qwen3" || std::string(arch) == "gemma3");
    if (std::string(arch) == "gemma3") {
      EXPECT_FALSE(cfg.has_output_weight);  // tied
      EXPECT_EQ(cfg.sliding_window, 64u);
      EXPECT_EQ(std::count(cfg.is_sliding.begin(), cfg.is_sliding.end(), true), 5);
      EXPECT_FALSE(cfg.is_sliding[5]);
    } else {
      EXPECT_TRUE(cfg.has_output_weight);
    }
  }
}

TEST(TinyModel, TokenizerMetadataIsComplete) {
  TinyModelSpec spec;
  spec.chat_template = "{{ messages }}";
  auto file = build_and_read(spec);
  auto tokens = file.get_strings("tokenizer.ggml.tokens");
  auto merges = file.get_strings("tokenizer.ggml.merges");
  ASSERT_TRUE(tokens && merges);
  std::set<std::string> vocab(tokens->begin(), tokens->end());
  EXPECT_EQ(vocab.size(), tokens->size()) << "token strings must be unique";
  for (const auto& m : *merges) {
    auto space = m.find(' ');
    ASSERT_NE(space, std::string::npos);
    std::string left = m.substr(0, space), right = m.substr(space + 1);
    EXPECT_TRUE(vocab.count(left) && vocab.count(right) && vocab.count(left + right)) << m;
  }
  EXPECT_EQ(file.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*file.get_uint("tokenizer.ggml.eos_token_id"), tokens->size() - 1);
  EXPECT_EQ((*tokens)[tokens->size() - 1], "<|im_end|>");
  EXPECT_EQ(file.get_string("tokenizer.chat_template"), "{{ messages }}");
  // All 256 byte symbols are present.
  EXPECT_EQ(std::count_if(tokens->begin(), tokens->end(),
                          [](const std::string& t) { return t == "Ġ" || t == "Ċ" || t == "!"; }),
            3);

  spec.tokenizer = TinyTokenizerKind::kSentencePieceLike;
  auto spm = build_and_read(spec);
  auto spm_tokens = *spm.get_strings("tokenizer.ggml.tokens");
  auto scores = *spm.get_floats("tokenizer.ggml.scores");
  EXPECT_EQ(scores.size(), spm_tokens.size());
  EXPECT_EQ(spm_tokens[6], "<0x00>");
  EXPECT_EQ(spm_tokens[6 + 255], "<0xFF>");
  EXPECT_EQ(*spm.get_uint("tokenizer.ggml.bos_token_id"), 2u);
}

// Relative RMS error of `got` against `want`.
double relative_rms_error(const std::vector<float>& want, const std::vector<float>& got) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * double(got[i] - want[i]);
    norm += want[i] * double(want[i]);
  }
  return std::sqrt(err / norm);
}

TEST(TinyModel, EveryQuantizableWeightTypeHoldsTheIntendedValues) {
  struct Case {
    GgmlType type;
    double max_error;
  };
  // Bounds sit 1.3-2.5x above the relative RMS error each format's reference quantizer made on
  // these Gaussian weights when this test was written (Q4_K 0.071, Q8_0 0.0054, F16 2e-4).
  const Case cases[] = {
      {GgmlType::kF32, 0.0},    {GgmlType::kF16, 5e-4},   {GgmlType::kBF16, 4e-3},
      {GgmlType::kQ8_0, 0.008}, {GgmlType::kQ5_0, 0.055}, {GgmlType::kQ5_1, 0.055},
      {GgmlType::kQ4_0, 0.11},  {GgmlType::kQ4_1, 0.11},  {GgmlType::kQ6_K, 0.025},
      {GgmlType::kQ5_K, 0.05},  {GgmlType::kQ4_K, 0.1}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(gguf::ggml_type_name(c.type)));
    TinyModelSpec spec;
    spec.n_embd = 256;
    spec.n_ff = 512;
    spec.n_layers = 1;
    spec.weight_type = c.type;
    auto file = build_and_read(spec);
    const auto* t = file.find_tensor("blk.0.ffn_up.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, c.type);
    auto want = tiny_tensor_values(spec, "blk.0.ffn_up.weight", t->n_elements);
    std::vector<float> got(t->n_elements);
    auto bytes = file.tensor_data(*t);
    if (c.type == GgmlType::kF32) {
      std::memcpy(got.data(), bytes.data(), bytes.size());
    } else {
      quant::dequantize_row(c.type, bytes.data(), got.data(), static_cast<int64_t>(got.size()));
    }
    double error = relative_rms_error(want, got);
    RecordProperty(std::string(gguf::ggml_type_name(c.type)), std::to_string(error));
    EXPECT_LE(error, c.max_error);
    if (c.type != GgmlType::kF32) {
      EXPECT_GT(error, 0.0);  // really converted
    }
    // Norms stay F32 whatever the weight type.
    EXPECT_EQ(file.find_tensor("blk.0.attn_norm.weight")->type, GgmlType::kF32);
  }
}

// --fast-weights: random codes with fixed scales. Every value finite and of the intended size
// (its RMS within a factor of 3 of weight_stddev: the codes are uniform, not Gaussian), the
// bytes deterministic, and a forward pass over such a file stays finite.
TEST(TinyModel, FastWeightsAreFiniteSizedAndDeterministic) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                        GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ4_0, GgmlType::kQ4_1,
                        GgmlType::kQ6_K, GgmlType::kQ5_K, GgmlType::kQ4_K}) {
    SCOPED_TRACE(std::string(gguf::ggml_type_name(type)));
    TinyModelSpec spec;
    spec.n_embd = 256;
    spec.n_ff = 512;
    spec.n_layers = 1;
    spec.weight_type = type;
    spec.fast_weights = true;
    const auto bytes = build_tiny_model(spec).to_bytes();
    EXPECT_EQ(bytes, build_tiny_model(spec).to_bytes());
    const auto file = gguf::GgufFile::from_bytes(bytes);
    const auto* t = file.find_tensor("blk.0.ffn_up.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, type);
    std::vector<float> got(t->n_elements);
    quant::dequantize_row(type, file.tensor_data(*t).data(), got.data(),
                          static_cast<int64_t>(got.size()));
    double sum_sq = 0.0;
    for (float v : got) {
      ASSERT_TRUE(std::isfinite(v));
      sum_sq += static_cast<double>(v) * v;
    }
    const double rms = std::sqrt(sum_sq / static_cast<double>(got.size()));
    EXPECT_GT(rms, spec.weight_stddev / 3.0);
    EXPECT_LT(rms, spec.weight_stddev * 3.0);
    // Several chunks of blocks (3 whole ones and a part) give the same bytes on 1 thread and
    // on 4.
    const uint64_t n = uint64_t{3 * 4096 + 1} * gguf::ggml_type_info(type).block_size;
    EXPECT_EQ(fast_weight_bytes(type, n, 9, 0.05f, 1), fast_weight_bytes(type, n, 9, 0.05f, 4));
    // A forward pass over the file stays finite.
    Transformer model(file, 1);
    KvStorage kv(model.config(), 16, 2, kv::KvCacheType::kF16);
    const std::vector<kv::BlockId> table = {0, 1};
    const std::vector<int32_t> tokens = {1, 5, 9, 2, 7, 3, 4, 8};
    kv::StepBatch batch;
    batch.add_sequence(0, tokens, 0, table, 1);
    std::vector<float> logits(static_cast<size_t>(model.n_vocab()));
    model.forward(batch, kv, logits.data());
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(TinyModel, FastWeightsRefuseTypesWithoutAFill) {
  for (GgmlType type : {GgmlType::kQ8_1, GgmlType::kQ8_K}) {
    EXPECT_THROW(fast_weight_bytes(type, 256, 1, 0.05f), Error) << gguf::ggml_type_name(type);
  }
}

TEST(TinyModel, SameSpecSameBytesOtherSeedOtherWeights) {
  TinyModelSpec spec;
  auto a = build_tiny_model(spec).to_bytes();
  auto b = build_tiny_model(spec).to_bytes();
  EXPECT_EQ(a, b);
  spec.seed = 2;
  auto c = build_tiny_model(spec).to_bytes();
  EXPECT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

TEST(TinyModel, WritesAFileTheReaderOpens) {
  testing::TempDir dir;
  TinyModelSpec spec;
  spec.architecture = "llama";
  spec.weight_type = GgmlType::kQ8_0;
  auto path = dir.path() / "tiny.gguf";
  write_tiny_model(spec, path);
  auto file = gguf::GgufFile::open(path);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.find_tensor("blk.1.ffn_down.weight")->type, GgmlType::kQ8_0);
}

// Benchmark files take a real model's vocabulary shape and quantizer mix (e.g. a Q8_0 embedding
// under Q4_0 matrices, tied as in Qwen2.5-0.5B).
TEST(TinyModel, PadsTheVocabularyAndTakesItsOwnEmbeddingType) {
  TinyModelSpec spec;
  spec.weight_type = GgmlType::kQ4_0;
  spec.embedding_type = GgmlType::kQ8_0;
  spec.tie_embeddings = true;
  spec.n_vocab = 1000;
  auto file = build_and_read(spec);
  const auto own = make_tiny_vocabulary(spec.tokenizer).tokens.size();
  ASSERT_LT(own, 1000u);
  auto cfg = ModelConfig::from_gguf(file);
  EXPECT_EQ(cfg.n_vocab, 1000u);
  EXPECT_FALSE(cfg.has_output_weight);
  const auto* embd = file.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, GgmlType::kQ8_0);
  EXPECT_EQ(embd->ne[1], 1000u);
  EXPECT_EQ(file.find_tensor("blk.0.ffn_up.weight")->type, GgmlType::kQ4_0);
  auto types = file.get_ints("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.has_value());
  ASSERT_EQ(types->size(), 1000u);
  EXPECT_EQ((*types)[own], 5);  // unused
  EXPECT_EQ((*types)[999], 5);
  EXPECT_NE((*types)[own - 1], 5);

  spec.n_vocab = 10;  // below the tokenizer's own size
  EXPECT_THROW(build_tiny_model(spec), Error);
}

TEST(TinyModel, RefusesSpecsThatCannotMakeAValidFile) {
  TinyModelSpec spec;
  spec.weight_type = GgmlType::kQ4_K;  // 256-element blocks; n_embd is 64
  try {
    build_tiny_model(spec);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("n_embd = 64 is not a multiple of the Q4_K block size 256"));
  }
  spec = TinyModelSpec{};
  spec.architecture = "gpt5";
  EXPECT_THROW(build_tiny_model(spec), Error);
  spec = TinyModelSpec{};
  spec.n_kv_heads = 3;
  EXPECT_THROW(build_tiny_model(spec), Error);
}

}  // namespace
}  // namespace llms::model
