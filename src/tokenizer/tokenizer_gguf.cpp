// tokenizer/tokenizer_gguf: reads the tokenizer.ggml.* metadata of a GGUF file into a VocabSpec.
// Kept apart from the rest so that code using from_spec alone does not pull in the GGUF reader.
#include <limits>
#include <string>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::tokenizer {

namespace {

int32_t read_id(const gguf::GgufFile& file, std::string_view key) {
  const std::optional<int64_t> v = file.get_int(key);
  if (!v) return kNoToken;
  if (*v < 0 || *v > std::numeric_limits<int32_t>::max()) {
    throw Error(Error::Kind::kInvalidFile, "tokenizer: " + std::string(key) + " = " +
                                               std::to_string(*v) + " is not a token id");
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& file) {
  VocabSpec spec;
  const std::optional<std::string> model = file.get_string("tokenizer.ggml.model");
  if (!model) {
    throw Error(Error::Kind::kInvalidFile, "tokenizer: tokenizer.ggml.model is missing");
  }
  if (*model == "gpt2") {
    spec.kind = ModelKind::kByteLevelBpe;
  } else if (*model == "llama") {
    spec.kind = ModelKind::kSentencePieceBpe;
  } else {
    throw Error(Error::Kind::kUnsupported,
                "tokenizer: tokenizer.ggml.model \"" + *model +
                    "\" is not supported (supported: \"gpt2\", \"llama\")");
  }
  spec.architecture = file.get_string("general.architecture").value_or("");
  spec.pre = file.get_string("tokenizer.ggml.pre").value_or("default");

  auto tokens = file.get_strings("tokenizer.ggml.tokens");
  if (!tokens) {
    throw Error(Error::Kind::kInvalidFile, "tokenizer: tokenizer.ggml.tokens is missing");
  }
  spec.tokens = std::move(*tokens);
  if (auto types = file.get_ints("tokenizer.ggml.token_type")) {
    spec.token_types.reserve(types->size());
    for (int64_t t : *types) {
      spec.token_types.push_back(t >= 0 && t <= 6 ? static_cast<int32_t>(t) : 0);
    }
  }
  if (auto merges = file.get_strings("tokenizer.ggml.merges")) spec.merges = std::move(*merges);
  if (spec.kind == ModelKind::kByteLevelBpe && !file.find("tokenizer.ggml.merges")) {
    // transformers would derive merges from token order here; no real file needs that.
    throw Error(Error::Kind::kUnsupported,
                "tokenizer: tokenizer.ggml.merges is missing for a \"gpt2\" tokenizer");
  }
  if (auto scores = file.get_floats("tokenizer.ggml.scores")) {
    spec.scores.reserve(scores->size());
    for (double s : *scores) spec.scores.push_back(static_cast<float>(s));
  }
  spec.bos_id = read_id(file, "tokenizer.ggml.bos_token_id");
  spec.eos_id = read_id(file, "tokenizer.ggml.eos_token_id");
  spec.unk_id = read_id(file, "tokenizer.ggml.unknown_token_id");
  spec.pad_id = read_id(file, "tokenizer.ggml.padding_token_id");
  spec.add_bos = file.get_bool("tokenizer.ggml.add_bos_token");
  spec.add_eos = file.get_bool("tokenizer.ggml.add_eos_token");
  spec.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix");
  return from_spec(spec);
}

}  // namespace llms::tokenizer
