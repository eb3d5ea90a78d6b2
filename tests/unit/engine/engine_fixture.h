// Shared fixture of the engine tests: a tiny random-weight qwen2 model the project writes itself
// (peaked logits, so greedy decoding has few near-ties), an output collector, and request and
// config builders. Invariants of the KV pool are checked after every step (config()).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
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
#include "util/error.h"

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
  static void SetUpTestSuite() { load_model(base_spec(), "tiny.gguf"); }

  // The suite's model: qwen2, 2 layers of 64, 4 heads over 2 KV heads, 2,048 tokens of context,
  // peaked logits (fewer near-ties in greedy decoding). Suites derived for other shapes change
  // what they need and call load_model() from their own SetUpTestSuite.
  static model::TinyModelSpec base_spec() {
    model::TinyModelSpec spec;
    spec.architecture = "qwen2";
    spec.n_layers = 2;
    spec.n_embd = 64;
    spec.n_ff = 128;
    spec.n_heads = 4;
    spec.n_kv_heads = 2;
    spec.n_ctx = 2048;
    spec.weight_stddev = 0.3f;
    return spec;
  }
  static void load_model(const model::TinyModelSpec& spec, const char* file_name) {
    dir_ = new testing::TempDir();
    path_ = new std::filesystem::path(dir_->path() / file_name);
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

  // Constructing an engine with `c` is refused with kInvalidArgument naming `field`.
  static void expect_refused(const EngineConfig& c, const std::string& field) {
    try {
      Engine e(*file_, *tok_, c);
      ADD_FAILURE() << "accepted; expected a refusal naming " << field;
    } catch (const Error& err) {
      EXPECT_EQ(err.kind(), Error::Kind::kInvalidArgument);
      EXPECT_NE(std::string(err.what()).find(field), std::string::npos) << err.what();
    }
  }

  // Greedy tokens of a run among others against the same request's lone run: the same length,
  // and where they first differ the lone run was at a near-tie. Returns 1 if they differ.
  static int diverged_at_tie(const std::vector<TokenOutput>& got,
                             const std::vector<TokenOutput>& alone, size_t request) {
    EXPECT_EQ(got.size(), alone.size()) << "request " << request;
    for (size_t t = 0; t < std::min(got.size(), alone.size()); ++t) {
      if (got[t].id == alone[t].id) continue;
      const auto& top = alone[t].top_logprobs;
      EXPECT_LT(top[0].logprob - top[1].logprob, 1e-3f)
          << "request " << request << " token " << t << " diverged off a tie";
      return 1;  // after a legitimate divergence the continuations differ
    }
    return 0;
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
