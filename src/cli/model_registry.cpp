#include "model_registry.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace llms::cli {

namespace {

std::filesystem::path executable_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
}

// First existing candidate: installed layout (<prefix>/share/llmserve), then the source tree.
std::filesystem::path locate(const std::string& installed_name, const std::string& source_rel) {
  std::vector<std::filesystem::path> candidates = {
      executable_dir() / ".." / "share" / "llmserve" / installed_name,
      std::filesystem::path(LLMS_SOURCE_DIR) / source_rel,
  };
  for (const auto& c : candidates) {
    if (std::filesystem::exists(c)) return c;
  }
  throw Error(Error::Kind::kNotFound, "cannot find " + installed_name + " (looked in " +
                                          candidates[0].string() + " and " +
                                          candidates[1].string() + ")");
}

nlohmann::json read_registry_json() {
  auto path = registry_path();
  std::ifstream in(path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Error::Kind::kInvalidFile, path.string() + ": " + e.what());
  }
}

}  // namespace

std::filesystem::path cache_root(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv("LLMSERVE_CACHE"); env && *env) return env;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/tmp") / ".cache" / "llmserve";
}

std::filesystem::path registry_path() {
  if (const char* env = std::getenv("LLMSERVE_REGISTRY"); env && *env) return env;
  return locate("registry.json", "models/registry.json");
}

std::filesystem::path pull_script_path() {
  return locate("pull_model.py", "scripts/pull_model.py");
}

std::vector<RegisteredModel> load_registry() {
  nlohmann::json j = read_registry_json();
  std::vector<RegisteredModel> out;
  try {
    for (const auto& m : j.at("models")) {
      RegisteredModel r;
      r.name = m.at("name").get<std::string>();
      r.aliases = m.value("aliases", std::vector<std::string>{});
      r.file = m.at("file").get<std::string>();
      r.architecture = m.value("architecture", "");
      r.size = m.value("size", uint64_t{0});
      r.sha256 = m.value("sha256", "");
      out.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(Error::Kind::kInvalidFile, registry_path().string() + ": " + e.what());
  }
  return out;
}

std::string default_model_name() { return read_registry_json().value("default", ""); }

std::optional<RegisteredModel> find_registered(const std::string& name_or_alias) {
  std::string wanted = name_or_alias == "default" ? default_model_name() : name_or_alias;
  for (auto& m : load_registry()) {
    if (m.name == wanted) return m;
    for (const auto& a : m.aliases) {
      if (a == wanted) return m;
    }
  }
  return std::nullopt;
}

std::filesystem::path resolve_model(const std::string& name_or_path,
                                    const std::string& cache_flag) {
  if (std::filesystem::exists(name_or_path)) return name_or_path;
  auto registered = find_registered(name_or_path);
  if (!registered) {
    throw Error(Error::Kind::kNotFound, "no file or registered model named '" + name_or_path +
                                            "' (see `llmserve pull --list`)");
  }
  auto path = cache_root(cache_flag) / "models" / registered->file;
  if (!std::filesystem::exists(path)) {
    throw Error(Error::Kind::kNotFound, "model '" + registered->name + "' is not cached at " +
                                            path.string() + "; run `llmserve pull " +
                                            registered->name + "`");
  }
  return path;
}

}  // namespace llms::cli
