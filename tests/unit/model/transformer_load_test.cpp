// Loading refuses malformed model files before any compute, naming the tensor or key at fault:
// a missing tensor, a shape that disagrees with the hyper-parameters, a weight type the kernels
// cannot multiply, a norm that is not F32, an unknown architecture. Each case starts from a valid
// tiny model and changes one thing, so the error can only come from that change.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/tiny_model.h"
#include "model/transformer.h"
#include "util/error.h"

namespace llms::model {
namespace {

using gguf::GgmlType;
using ::testing::HasSubstr;

struct TensorEdit {
  std::string name;  // the tensor to change
  bool drop = false;
  std::vector<uint64_t> ne;  // new shape (empty: keep)
  GgmlType type = GgmlType::kF32;
  bool retype = false;
};

TensorEdit drop(std::string name) {
  TensorEdit e;
  e.name = std::move(name);
  e.drop = true;
  return e;
}

TensorEdit reshape(std::string name, std::vector<uint64_t> ne) {
  TensorEdit e;
  e.name = std::move(name);
  e.ne = std::move(ne);
  return e;
}

TensorEdit retype(std::string name, GgmlType type) {
  TensorEdit e;
  e.name = std::move(name);
  e.type = type;
  e.retype = true;
  return e;
}

// The valid tiny model's bytes with one tensor edited; new data is zero bytes of the right size.
std::vector<uint8_t> edited_model(const TinyModelSpec& spec, const TensorEdit& edit,
                                  const std::function<void(gguf::GgufWriter&)>& meta = {}) {
  auto original_bytes = build_tiny_model(spec).to_bytes();
  auto original = gguf::GgufFile::from_bytes(original_bytes);
  gguf::GgufWriter w;
  w.copy_metadata(original);
  if (meta) meta(w);
  bool found = false;
  for (const auto& t : original.tensors()) {
    std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (t.name != edit.name) {
      auto data = original.tensor_data(t);
      w.add_tensor(t.name, t.type, ne, std::vector<uint8_t>(data.begin(), data.end()));
      continue;
    }
    found = true;
    if (edit.drop) continue;
    if (!edit.ne.empty()) ne = edit.ne;
    GgmlType type = edit.retype ? edit.type : t.type;
    uint64_t n = 1;
    for (uint64_t d : ne) n *= d;
    auto bytes = gguf::ggml_row_bytes(type, n);
    EXPECT_TRUE(bytes.has_value());
    w.add_tensor(t.name, type, ne, std::vector<uint8_t>(bytes.value_or(0)));
  }
  EXPECT_TRUE(found || edit.name.empty()) << edit.name;
  return w.to_bytes();
}

// The message of the llms::Error that loading `bytes` throws ("" when it loads).
std::string load_error(const std::vector<uint8_t>& bytes) {
  auto file = gguf::GgufFile::from_bytes(bytes);
  try {
    Transformer t(file, 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TinyModelSpec qwen_spec() {
  TinyModelSpec spec;
  spec.architecture = "qwen2";
  spec.weight_type = GgmlType::kQ8_0;
  return spec;
}

TEST(TransformerLoad, TheUneditedTinyModelLoads) {
  EXPECT_EQ(load_error(edited_model(qwen_spec(), {})), "");
}

TEST(TransformerLoad, MissingTensorIsNamed) {
  TensorEdit edit = drop("blk.1.ffn_up.weight");
  std::string err = load_error(edited_model(qwen_spec(), edit));
  EXPECT_THAT(err, HasSubstr("lacks tensor 'blk.1.ffn_up.weight'"));
}

TEST(TransformerLoad, MissingBiasOfAQkvBiasArchitectureIsNamed) {
  TensorEdit edit = drop("blk.0.attn_k.bias");
  EXPECT_THAT(load_error(edited_model(qwen_spec(), edit)), HasSubstr("'blk.0.attn_k.bias'"));
}

TEST(TransformerLoad, ShapeThatDisagreesWithTheHyperParametersIsNamed) {
  // attn_q must be n_embd (64) inputs by n_heads * head_dim (64) outputs; give it 96 outputs.
  TensorEdit edit = reshape("blk.0.attn_q.weight", {64, 96});
  std::string err = load_error(edited_model(qwen_spec(), edit));
  EXPECT_THAT(err, HasSubstr("tensor 'blk.0.attn_q.weight' has shape 64 x 96"));
  EXPECT_THAT(err, HasSubstr("need 64 x 64"));
}

TEST(TransformerLoad, WrongRankIsRefused) {
  TensorEdit edit = reshape("output_norm.weight", {8, 8});
  EXPECT_THAT(load_error(edited_model(qwen_spec(), edit)),
              HasSubstr("tensor 'output_norm.weight' has shape 8 x 8"));
}

TEST(TransformerLoad, WeightTypeTheKernelsCannotMultiplyIsNamed) {
  // Q8_1 is an activation format: the matmul kernels have no weight path for it.
  TensorEdit edit = retype("blk.1.attn_output.weight", GgmlType::kQ8_1);
  std::string err = load_error(edited_model(qwen_spec(), edit));
  EXPECT_THAT(err, HasSubstr("tensor 'blk.1.attn_output.weight' has type Q8_1"));
}

TEST(TransformerLoad, NormThatIsNotF32IsNamed) {
  TensorEdit edit = retype("blk.0.attn_norm.weight", GgmlType::kF16);
  std::string err = load_error(edited_model(qwen_spec(), edit));
  EXPECT_THAT(err, HasSubstr("tensor 'blk.0.attn_norm.weight' has type F16"));
  EXPECT_THAT(err, HasSubstr("must be F32"));
}

TEST(TransformerLoad, UnknownArchitectureIsNamed) {
  std::string err = load_error(edited_model(qwen_spec(), {}, [](gguf::GgufWriter& w) {
    w.set_string("general.architecture", "mamba9");
  }));
  EXPECT_THAT(err, HasSubstr("mamba9"));
}

TEST(TransformerLoad, UnknownRopeScalingTypeIsNamed) {
  for (const char* type : {"longrope", "dynamic"}) {
    std::string err = load_error(edited_model(qwen_spec(), {}, [&](gguf::GgufWriter& w) {
      w.set_string("qwen2.rope.scaling.type", type);
      w.set_f32("qwen2.rope.scaling.factor", 4.0f);
    }));
    EXPECT_THAT(err, HasSubstr("RoPE scaling type '" + std::string(type) + "' is not supported"));
  }
}

TEST(TransformerLoad, SupportedRopeScalingTypesLoad) {
  for (const char* type : {"none", "linear", "yarn"}) {
    SCOPED_TRACE(type);
    EXPECT_EQ(load_error(edited_model(qwen_spec(), {},
                                      [&](gguf::GgufWriter& w) {
                                        w.set_string("qwen2.rope.scaling.type", type);
                                        w.set_f32("qwen2.rope.scaling.factor", 4.0f);
                                        w.set_u32("qwen2.rope.scaling.original_context_length",
                                                  128);
                                      })),
              "");
  }
}

TEST(TransformerLoad, MetadataTheForwardPassDoesNotImplementIsNamed) {
  struct Case {
    std::function<void(gguf::GgufWriter&)> meta;
    std::string named;
  };
  const Case cases[] = {
      {[](gguf::GgufWriter& w) { w.set_u32("qwen2.expert_count", 8); },
       "mixture of experts ('qwen2.expert_count' = 8)"},
      {[](gguf::GgufWriter& w) { w.set_u32("qwen2.rope.dimension_count", 8); },
       "partial rotary embedding ('qwen2.rope.dimension_count' = 8 of a head width 16)"},
      {[](gguf::GgufWriter& w) { w.set_f32("qwen2.final_logit_softcapping", 30.0f); },
       "logit soft-capping ('qwen2.final_logit_softcapping')"},
      {[](gguf::GgufWriter& w) {
         w.set_string("qwen2.rope.scaling.type", "yarn");
         w.set_f32("qwen2.rope.scaling.yarn_log_multiplier", 0.1f);
       },
       "'qwen2.rope.scaling.yarn_log_multiplier'"},
      {[](gguf::GgufWriter& w) { w.set_f32("qwen2.attention.scale", 0.5f); },
       "'qwen2.attention.scale'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.named);
    std::string err = load_error(edited_model(qwen_spec(), {}, c.meta));
    EXPECT_THAT(err, HasSubstr("does not implement"));
    EXPECT_THAT(err, HasSubstr(c.named));
  }
}

TEST(TransformerLoad, EveryArchitecturesTinyModelLoadsAndRefusesAMissingFfn) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma3"}) {
    SCOPED_TRACE(arch);
    TinyModelSpec spec = qwen_spec();
    spec.architecture = arch;
    EXPECT_EQ(load_error(edited_model(spec, {})), "");
    TensorEdit edit = drop("blk.0.ffn_down.weight");
    EXPECT_THAT(load_error(edited_model(spec, edit)), HasSubstr("'blk.0.ffn_down.weight'"));
  }
}

}  // namespace
}  // namespace llms::model
