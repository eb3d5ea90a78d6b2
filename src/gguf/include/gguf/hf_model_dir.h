// gguf/hf_model_dir: a Hugging Face model directory: safetensors weights (single or sharded),
// config.json, and the optional tokenizer.json, tokenizer_config.json and
// generation_config.json.
//
// Contract: open() either returns a directory whose config.json parsed to a JSON object, whose
// optional JSON files (when present) parsed within the size and depth caps of gguf/json_file.h,
// and whose weights passed every check of ShardedSafetensors; or throws llms::Error naming the
// file and the problem. Nothing here knows an architecture: typed getters read any key, and the
// model/ module decides what a key means.
//
// Config look-ups take a key, or a dotted path into nested objects ("text_config.hidden_size",
// "rope_scaling.factor"). An absent key and a JSON null both read as std::nullopt (HF writes
// null for "not set"); a present key of the wrong type throws Error(kInvalidFile) naming the
// key, its type and the type wanted.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/safetensors_file.h"

namespace llms::gguf {

class HfModelDir {
 public:
  static HfModelDir open(const std::filesystem::path& dir);

  HfModelDir(HfModelDir&&) noexcept;
  HfModelDir& operator=(HfModelDir&&) noexcept;
  ~HfModelDir();

  const std::filesystem::path& path() const;
  const ShardedSafetensors& weights() const;

  const nlohmann::json& config() const;             // always an object
  const nlohmann::json* tokenizer() const;          // nullptr when tokenizer.json is absent
  const nlohmann::json* tokenizer_config() const;   // nullptr when absent
  const nlohmann::json* generation_config() const;  // nullptr when absent

  // config "architectures"[0] (e.g. "Qwen2ForCausalLM") and "model_type" (e.g. "qwen2");
  // std::nullopt when absent, Error when present but not a (non-empty array of) string.
  std::optional<std::string> architecture() const;
  std::optional<std::string> model_type() const;

  // The value at a key or dotted path; nullptr when absent or null.
  const nlohmann::json* find(std::string_view key) const;

  // get_int accepts integers; get_uint non-negative integers; get_float any number; get_ints /
  // get_floats / get_strings arrays whose every element qualifies.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_ints(std::string_view key) const;
  std::optional<std::vector<double>> get_floats(std::string_view key) const;
  std::optional<std::vector<std::string>> get_strings(std::string_view key) const;

 private:
  struct Impl;
  explicit HfModelDir(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llms::gguf
