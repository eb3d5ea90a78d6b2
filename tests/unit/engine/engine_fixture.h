// Shared fixture of the engine tests: a tiny random-weight qwen2 model the project writes itself
// (peaked logits, so greedy decoding has few near-ties), an output collector, and request and
// config builders. Invariants of the KV pool are checked after every step (config()).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "model/tiny_model.h"
#include "temp_dir.h"
#include "tokenizer/tokenizer.h"

namespace llms::engine::testing_support {

struct Collected {
  std::map<int32_t, std::vector<TokenOutput>> tokens;  // by sample index
  std::map<int32_t, std::string> text;
  std::map<int32_t, FinishReason> finish;
  std::map<int32_t, std::string> stop_reason;
  bool request_finished = false;
  RequestMetrics metrics;
  int n_events_after_finish = 0;
};

inline OutputCallback collect(Collected& c) {
  return [&c](const RequestOutput& o) {
    if (c.finish.count(o.index)) ++c.n_events_after_finish;
    auto& toks = c.tokens[o.index];
    toks.insert(toks.end(), o.tokens.begin(), o.tokens.end());
    c.text[o.index] += o.text;
    if (o.finished) {
      c.finish[o.index] = o.finish_reason;
      c.stop_reason[o.index] = o.stop_reason;
    }
    if (o.request_finished) {
      c.request_finished = true;
      c.metrics = o.metrics;
    }
  };
}

inline std::vector<int32_t> ids_of(const std::vector<TokenOutput>& tokens) {
  std::vector<int32_t> ids;
  for (const auto& t : tokens) ids.push_back(t.id);
  return ids;
}

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    model::TinyModelSpec spec;
    spec.architecture = "qwen2";
    spec.n_layers = 2;
    spec.n_embd = 64;
    spec.n_ff = 128;
    spec.n_heads = 4;
    spec.n_kv_heads = 2;
    spec.n_ctx = 2048;
    spec.weight_stddev = 0.3f;  // peaked logits: fewer near-ties in greedy decoding
    path_ = new std::filesystem::path(dir_->path() / "tiny.gguf");
    model::write_tiny_model(spec, *path_);
    file_ = new gguf::GgufFile(gguf::GgufFile::open(*path_));
    tok_ = new tokenizer::Tokenizer(tokenizer::Tokenizer::from_gguf(*file_));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete file_;
    delete path_;
    delete dir_;
  }

  static EngineConfig config(int32_t n_blocks, int32_t budget = 512, int32_t max_seqs = 64) {
    EngineConfig c;
    c.n_kv_blocks = n_blocks;
    c.block_size = 16;
    c.n_threads = 2;
    c.check_invariants = true;
    c.scheduler.max_num_batched_tokens = budget;
    c.scheduler.max_num_seqs = max_seqs;
    return c;
  }

  static std::vector<int32_t> random_prompt(std::mt19937& rng, size_t n) {
    std::uniform_int_distribution<int32_t> d(0, 255);  // byte tokens: always in the vocabulary
    std::vector<int32_t> p(n);
    for (auto& t : p) t = d(rng);
    return p;
  }

  static GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    r.sampling.logprobs = true;
    r.sampling.n_top_logprobs = 2;
    r.ignore_eos = true;
    return r;
  }

  static void run_to_end(Engine& e) {
    int guard = 0;
    while (e.has_unfinished()) {
      ASSERT_TRUE(e.step()) << "unfinished requests but nothing scheduled";
      ASSERT_LT(++guard, 100000);
    }
  }

  static inline testing::TempDir* dir_ = nullptr;
  static inline std::filesystem::path* path_ = nullptr;
  static inline gguf::GgufFile* file_ = nullptr;
  static inline tokenizer::Tokenizer* tok_ = nullptr;
};

}  // namespace llms::engine::testing_support
