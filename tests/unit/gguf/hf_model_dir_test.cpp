// Tests for gguf/hf_model_dir and gguf/json_file: a model directory built in a temp dir, the
// committed golden directory, and the ways each JSON file can be missing or broken.
#include "gguf/hf_model_dir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gguf/json_file.h"
#include "safetensors_bytes.h"
#include "temp_dir.h"
#include "util/error.h"

namespace llms::gguf {
namespace {

using llms::testing::SafetensorsBuilder;
using llms::testing::TempDir;

#define EXPECT_LLMS_ERROR(statement, expected_kind, substring)                         \
  do {                                                                                 \
    try {                                                                              \
      statement;                                                                       \
      ADD_FAILURE() << "expected llms::Error containing \"" << (substring) << "\"";    \
    } catch (const llms::Error& e) {                                                   \
      EXPECT_EQ(e.kind(), (expected_kind)) << e.what();                                \
      EXPECT_NE(std::string(e.what()).find(substring), std::string::npos) << e.what(); \
    }                                                                                  \
  } while (0)

constexpr auto kInvalid = Error::Kind::kInvalidFile;

constexpr const char* kConfig = R"({
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 64,
  "num_attention_heads": 4,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000,
  "tie_word_embeddings": true,
  "sliding_window": null,
  "eos_token_id": [1, 2],
  "layer_types": ["full_attention", "sliding_attention"],
  "scales": [0.5, 2],
  "negative": -3,
  "huge": 18446744073709551615,
  "name": "tiny",
  "rope_scaling": {"type": "linear", "factor": 2.0},
  "text_config": {"hidden_size": 32, "nested": {"deep": 7}},
  "dotted.key": 5
})";

struct ModelDirFixture {
  TempDir dir;
  ModelDirFixture() {
    dir.write("config.json", kConfig);
    dir.write("model.safetensors",
              SafetensorsBuilder().add_values<float>("w", "F32", {2}, {0.25f, -8.0f}).build());
  }
};

TEST(HfModelDir, OpensDirectoryWithConfigAndWeights) {
  ModelDirFixture f;
  f.dir.write("tokenizer.json", R"({"model": {"type": "BPE"}, "added_tokens": []})");
  f.dir.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  auto model = HfModelDir::open(f.dir.path());
  EXPECT_EQ(model.path(), f.dir.path());
  EXPECT_EQ(model.architecture(), "LlamaForCausalLM");
  EXPECT_EQ(model.model_type(), "llama");
  ASSERT_NE(model.tokenizer(), nullptr);
  EXPECT_EQ((*model.tokenizer())["model"]["type"], "BPE");
  ASSERT_NE(model.tokenizer_config(), nullptr);
  EXPECT_EQ((*model.tokenizer_config())["eos_token"], "</s>");
  EXPECT_EQ(model.generation_config(), nullptr);
  EXPECT_TRUE(model.config().is_object());

  const SafetensorsTensor* w = model.weights().find_tensor("w");
  ASSERT_NE(w, nullptr);
  auto bytes = model.weights().tensor_data(*w);
  ASSERT_EQ(bytes.size(), 8u);
  float values[2];
  std::memcpy(values, bytes.data(), 8);
  EXPECT_EQ(values[0], 0.25f);
  EXPECT_EQ(values[1], -8.0f);
}

TEST(HfModelDir, TypedGettersReadValues) {
  ModelDirFixture f;
  auto model = HfModelDir::open(f.dir.path());
  EXPECT_EQ(model.get_int("hidden_size"), 64);
  EXPECT_EQ(model.get_uint("num_attention_heads"), 4u);
  EXPECT_EQ(model.get_int("negative"), -3);
  EXPECT_EQ(model.get_uint("huge"), 18446744073709551615ull);
  EXPECT_DOUBLE_EQ(*model.get_float("rms_norm_eps"), 1e-05);
  EXPECT_DOUBLE_EQ(*model.get_float("rope_theta"), 10000.0);  // an integer reads as a float
  EXPECT_EQ(model.get_bool("tie_word_embeddings"), true);
  EXPECT_EQ(model.get_string("name"), "tiny");
  EXPECT_EQ(model.get_ints("eos_token_id"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(model.get_floats("scales"), (std::vector<double>{0.5, 2.0}));
  EXPECT_EQ(model.get_strings("layer_types"),
            (std::vector<std::string>{"full_attention", "sliding_attention"}));
  // Nested paths, and a key that itself holds a dot.
  EXPECT_DOUBLE_EQ(*model.get_float("rope_scaling.factor"), 2.0);
  EXPECT_EQ(model.get_string("rope_scaling.type"), "linear");
  EXPECT_EQ(model.get_int("text_config.hidden_size"), 32);
  EXPECT_EQ(model.get_int("text_config.nested.deep"), 7);
  EXPECT_EQ(model.get_int("dotted.key"), 5);
  // Absent and null both read as nullopt.
  EXPECT_EQ(model.get_int("absent"), std::nullopt);
  EXPECT_EQ(model.get_int("sliding_window"), std::nullopt);
  EXPECT_EQ(model.get_int("text_config.absent"), std::nullopt);
  EXPECT_EQ(model.get_int("name.sub"), std::nullopt);  // walking into a string
  EXPECT_EQ(model.find("absent"), nullptr);
  ASSERT_NE(model.find("rope_scaling"), nullptr);
  EXPECT_TRUE(model.find("rope_scaling")->is_object());
}

TEST(HfModelDir, TypedGettersNameKeyOnWrongType) {
  ModelDirFixture f;
  auto model = HfModelDir::open(f.dir.path());
  EXPECT_LLMS_ERROR(model.get_int("name"), kInvalid, "key 'name' is a string, expected an integer");
  EXPECT_LLMS_ERROR(model.get_int("rms_norm_eps"), kInvalid,
                    "key 'rms_norm_eps' is a floating-point number, expected an integer");
  EXPECT_LLMS_ERROR(model.get_int("huge"), kInvalid, "does not fit a signed 64-bit integer");
  EXPECT_LLMS_ERROR(model.get_uint("negative"), kInvalid, "key 'negative' is negative (-3)");
  EXPECT_LLMS_ERROR(model.get_float("name"), kInvalid, "key 'name' is a string, expected a number");
  EXPECT_LLMS_ERROR(model.get_bool("hidden_size"), kInvalid,
                    "key 'hidden_size' is an integer, expected a boolean");
  EXPECT_LLMS_ERROR(model.get_string("rope_scaling"), kInvalid,
                    "key 'rope_scaling' is an object, expected a string");
  EXPECT_LLMS_ERROR(model.get_ints("hidden_size"), kInvalid,
                    "key 'hidden_size' is an integer, expected an array");
  EXPECT_LLMS_ERROR(model.get_ints("layer_types"), kInvalid,
                    "key 'layer_types[0]' is a string, expected an integer");
  EXPECT_LLMS_ERROR(model.get_strings("eos_token_id"), kInvalid, "key 'eos_token_id[0]'");
  EXPECT_LLMS_ERROR(model.get_float("text_config.nested"), kInvalid,
                    "key 'text_config.nested' is an object");
  // The message names the config file too.
  EXPECT_LLMS_ERROR(model.get_int("name"), kInvalid, "config.json");
}

TEST(HfModelDir, ArchitectureAndModelTypeValidation) {
  TempDir dir;
  dir.write("model.safetensors", SafetensorsBuilder().build());
  dir.write("config.json", R"({"hidden_size": 1})");
  auto bare = HfModelDir::open(dir.path());
  EXPECT_EQ(bare.architecture(), std::nullopt);
  EXPECT_EQ(bare.model_type(), std::nullopt);

  dir.write("config.json", R"({"architectures": [], "model_type": 3})");
  auto bad = HfModelDir::open(dir.path());
  EXPECT_LLMS_ERROR(bad.architecture(), kInvalid, "key 'architectures' is an array");
  EXPECT_LLMS_ERROR(bad.model_type(), kInvalid, "key 'model_type' is an integer");
}

TEST(HfModelDir, ReadsGoldenDirectory) {
  auto model = HfModelDir::open(LLMS_TEST_DATA_DIR "/safetensors/sharded");
  EXPECT_EQ(model.architecture(), "Qwen2ForCausalLM");
  EXPECT_EQ(model.model_type(), "qwen2");
  EXPECT_EQ(model.get_int("hidden_size"), 2);
  EXPECT_DOUBLE_EQ(*model.get_float("rope_theta"), 1000000.0);
  EXPECT_EQ(model.get_bool("tie_word_embeddings"), false);
  EXPECT_EQ(model.get_int("sliding_window"), std::nullopt);
  EXPECT_EQ(model.tokenizer(), nullptr);
  EXPECT_TRUE(model.weights().is_sharded());
  EXPECT_EQ(model.weights().tensors().size(), 3u);
}

TEST(HfModelDir, RefusesMissingConfig) {
  TempDir dir;
  dir.write("model.safetensors", SafetensorsBuilder().build());
  EXPECT_LLMS_ERROR(HfModelDir::open(dir.path()), Error::Kind::kNotFound,
                    "has no config.json (required)");
  EXPECT_LLMS_ERROR(HfModelDir::open(dir.path() / "nowhere"), Error::Kind::kNotFound,
                    "does not exist");
}

TEST(HfModelDir, RefusesConfigThatIsNotJsonObject) {
  ModelDirFixture f;
  f.dir.write("config.json", "{\"hidden_size\": 64,");
  EXPECT_LLMS_ERROR(HfModelDir::open(f.dir.path()), kInvalid, "config.json': not valid JSON");
  f.dir.write("config.json", "[1, 2]");
  EXPECT_LLMS_ERROR(HfModelDir::open(f.dir.path()), kInvalid,
                    "config.json': top-level value is an array, expected an object");
  f.dir.write("config.json", "");
  EXPECT_LLMS_ERROR(HfModelDir::open(f.dir.path()), kInvalid, "config.json': not valid JSON");
}

TEST(HfModelDir, RefusesBrokenOptionalFilesByName) {
  ModelDirFixture f;
  f.dir.write("tokenizer.json", "{\"model\": ");
  EXPECT_LLMS_ERROR(HfModelDir::open(f.dir.path()), kInvalid, "tokenizer.json': not valid JSON");
  std::filesystem::remove(f.dir.path() / "tokenizer.json");
  f.dir.write("tokenizer_config.json", "\"text\"");
  EXPECT_LLMS_ERROR(HfModelDir::open(f.dir.path()), kInvalid,
                    "tokenizer_config.json': top-level value is a string");
  std::filesystem::remove(f.dir.path() / "tokenizer_config.json");
  f.dir.write("generation_config.json", "{\"eos_token_id\": \xff}");
  EXPECT_LLMS_ERROR(HfModelDir::open(f.dir.path()), kInvalid, "generation_config.json'");
}

TEST(HfModelDir, RefusesMissingOrBrokenWeights) {
  TempDir dir;
  dir.write("config.json", kConfig);
  EXPECT_LLMS_ERROR(HfModelDir::open(dir.path()), Error::Kind::kNotFound,
                    "no model.safetensors.index.json or model.safetensors");
  dir.write("model.safetensors", std::string_view("\x01\x00", 2));
  EXPECT_LLMS_ERROR(HfModelDir::open(dir.path()), kInvalid, "model.safetensors");
}

TEST(JsonFile, RefusesDeepNestingAndOversizeFiles) {
  TempDir dir;
  auto deep = dir.write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_LLMS_ERROR(read_json_file(deep), kInvalid, "nested deeper than 64 levels");
  // Exactly at the limit parses.
  std::string ok(kMaxJsonDepth, '[');
  ok += std::string(kMaxJsonDepth, ']');
  auto at_limit = dir.write("ok.json", ok);
  EXPECT_TRUE(read_json_file(at_limit).is_array());
  EXPECT_LLMS_ERROR(
      parse_json_text(std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']'),
                      "text"),
      kInvalid, "text: JSON nested deeper");

  auto big = dir.write("big.json", std::string(100, ' ') + "{}");
  EXPECT_TRUE(read_json_file(big, 102).is_object());
  EXPECT_LLMS_ERROR(read_json_file(big, 101), kInvalid, "is 102 bytes, more than the limit of 101");
  EXPECT_LLMS_ERROR(read_json_file(dir.path() / "absent.json"), Error::Kind::kNotFound,
                    "absent.json");
}

TEST(JsonFile, RefusesNulByte) {
  EXPECT_LLMS_ERROR(parse_json_text(std::string_view("{}\0{", 4), "nul"), kInvalid,
                    "nul: not valid JSON: NUL byte at offset 2");
}

TEST(JsonFile, DuplicateKeysKeepLastValue) {
  auto value = parse_json_text(R"({"a": 1, "a": 2})", "dup");
  EXPECT_EQ(value["a"], 2);
}

}  // namespace
}  // namespace llms::gguf
