// cli/model_registry: the registered models (models/registry.json) and where they are cached.
//
// `pull` delegates the download to scripts/pull_model.py (pip does the fetching); every other
// command uses this to turn a registered name like "qwen2.5-coder-0.5b-instruct" or "default"
// into a path in the cache.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace llms::cli {

struct RegisteredModel {
  std::string name;
  std::vector<std::string> aliases;
  std::string file;
  std::string architecture;
  uint64_t size = 0;
  std::string sha256;
};

// Cache root: explicit flag, else $LLMSERVE_CACHE, else ~/.cache/llmserve.
std::filesystem::path cache_root(const std::string& flag_value);

// Where the registry and the pull script live: beside the installed binary, or in the source tree.
std::filesystem::path registry_path();
std::filesystem::path pull_script_path();

std::vector<RegisteredModel> load_registry();
std::string default_model_name();
std::optional<RegisteredModel> find_registered(const std::string& name_or_alias);

// A path as given if it exists, else a registered model's cached file. Throws llms::Error naming
// what was looked for (and how to pull it) when neither exists.
std::filesystem::path resolve_model(const std::string& name_or_path, const std::string& cache_flag);

}  // namespace llms::cli
