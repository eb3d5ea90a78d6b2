// gguf/hf_model_dir: see the header. JSON files are read first (config.json before anything
// else, so the most common mistake, a wrong directory, is reported as such), then the weights.
#include "gguf/hf_model_dir.h"

#include <limits>
#include <utility>

#include "gguf/json_file.h"
#include "util/error.h"

namespace llms::gguf {

namespace {

constexpr std::string_view kConfigFile = "config.json";

std::optional<nlohmann::json> read_optional_json(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  nlohmann::json value = read_json_file(path);
  if (!value.is_object()) {
    throw_invalid_file(std::string("'") + path.string() + "': top-level value is " +
                       std::string(json_type_phrase(value)) + ", expected an object");
  }
  return value;
}

}  // namespace

struct HfModelDir::Impl {
  std::filesystem::path dir;
  std::string config_name;  // the config path, for messages
  nlohmann::json config;
  std::optional<nlohmann::json> tokenizer;
  std::optional<nlohmann::json> tokenizer_config;
  std::optional<nlohmann::json> generation_config;
  std::optional<ShardedSafetensors> weights;

  [[noreturn]] void wrong_type(std::string_view key, const nlohmann::json& value,
                               std::string_view wanted) const {
    throw_invalid_file(std::string("'") + config_name + "': key '" + std::string(key) + "' is " +
                       std::string(json_type_phrase(value)) + ", expected " + std::string(wanted));
  }

  // Integer conversions shared by the scalar and array getters; `what` names the value.
  int64_t to_int(std::string_view what, const nlohmann::json& v) const {
    if (v.is_number_unsigned()) {
      auto u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw_invalid_file(std::string("'") + config_name + "': key '" + std::string(what) +
                           "' value " + std::to_string(u) +
                           " does not fit a signed 64-bit integer");
      }
      return static_cast<int64_t>(u);
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    wrong_type(what, v, "an integer");
  }

  double to_float(std::string_view what, const nlohmann::json& v) const {
    if (!v.is_number()) wrong_type(what, v, "a number");
    return v.get<double>();
  }

  std::string to_string(std::string_view what, const nlohmann::json& v) const {
    if (!v.is_string()) wrong_type(what, v, "a string");
    return v.get<std::string>();
  }

  template <typename T, typename Convert>
  std::optional<std::vector<T>> to_list(std::string_view key, const nlohmann::json* v,
                                        Convert convert) const {
    if (v == nullptr) return std::nullopt;
    if (!v->is_array()) wrong_type(key, *v, "an array");
    std::vector<T> out;
    out.reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      out.push_back(convert(std::string(key) + "[" + std::to_string(i) + "]", (*v)[i]));
    }
    return out;
  }
};

HfModelDir::HfModelDir(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfModelDir::HfModelDir(HfModelDir&&) noexcept = default;
HfModelDir& HfModelDir::operator=(HfModelDir&&) noexcept = default;
HfModelDir::~HfModelDir() = default;

HfModelDir HfModelDir::open(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw Error(Error::Kind::kNotFound,
                std::string("model directory '") + dir.string() + "' does not exist");
  }
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  auto config_path = dir / kConfigFile;
  impl->config_name = config_path.string();
  auto config = read_optional_json(config_path);
  if (!config) {
    throw Error(Error::Kind::kNotFound, std::string("model directory '") + dir.string() +
                                            "' has no config.json (required)");
  }
  impl->config = std::move(*config);
  impl->tokenizer = read_optional_json(dir / "tokenizer.json");
  impl->tokenizer_config = read_optional_json(dir / "tokenizer_config.json");
  impl->generation_config = read_optional_json(dir / "generation_config.json");
  impl->weights.emplace(ShardedSafetensors::open(dir));
  return HfModelDir(std::move(impl));
}

const std::filesystem::path& HfModelDir::path() const { return impl_->dir; }
const ShardedSafetensors& HfModelDir::weights() const { return *impl_->weights; }
const nlohmann::json& HfModelDir::config() const { return impl_->config; }

const nlohmann::json* HfModelDir::tokenizer() const {
  return impl_->tokenizer ? &*impl_->tokenizer : nullptr;
}
const nlohmann::json* HfModelDir::tokenizer_config() const {
  return impl_->tokenizer_config ? &*impl_->tokenizer_config : nullptr;
}
const nlohmann::json* HfModelDir::generation_config() const {
  return impl_->generation_config ? &*impl_->generation_config : nullptr;
}

const nlohmann::json* HfModelDir::find(std::string_view key) const {
  const nlohmann::json& config = impl_->config;
  // A key that itself contains dots wins over the dotted path.
  auto exact = config.find(key);
  const nlohmann::json* value = nullptr;
  if (exact != config.end()) {
    value = &*exact;
  } else {
    value = &config;
    size_t start = 0;
    while (true) {
      size_t dot = key.find('.', start);
      std::string_view part =
          key.substr(start, dot == std::string_view::npos ? key.npos : dot - start);
      if (!value->is_object()) return nullptr;
      auto it = value->find(part);
      if (it == value->end()) return nullptr;
      value = &*it;
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
  }
  return value->is_null() ? nullptr : value;
}

std::optional<std::string> HfModelDir::architecture() const {
  const nlohmann::json* v = find("architectures");
  if (v == nullptr) return std::nullopt;
  if (!v->is_array() || v->empty() || !(*v)[0].is_string()) {
    impl_->wrong_type("architectures", *v, "a non-empty array of strings");
  }
  return (*v)[0].get<std::string>();
}

std::optional<std::string> HfModelDir::model_type() const { return get_string("model_type"); }

std::optional<int64_t> HfModelDir::get_int(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  return impl_->to_int(key, *v);
}

std::optional<uint64_t> HfModelDir::get_uint(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_number_integer()) {
    throw_invalid_file(std::string("'") + impl_->config_name + "': key '" + std::string(key) +
                       "' is negative (" + std::to_string(v->get<int64_t>()) +
                       "), expected a non-negative integer");
  }
  impl_->wrong_type(key, *v, "a non-negative integer");
}

std::optional<double> HfModelDir::get_float(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  return impl_->to_float(key, *v);
}

std::optional<bool> HfModelDir::get_bool(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) impl_->wrong_type(key, *v, "a boolean");
  return v->get<bool>();
}

std::optional<std::string> HfModelDir::get_string(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  return impl_->to_string(key, *v);
}

std::optional<std::vector<int64_t>> HfModelDir::get_ints(std::string_view key) const {
  return impl_->to_list<int64_t>(key, find(key), [this](std::string_view what, const auto& v) {
    return impl_->to_int(what, v);
  });
}

std::optional<std::vector<double>> HfModelDir::get_floats(std::string_view key) const {
  return impl_->to_list<double>(key, find(key), [this](std::string_view what, const auto& v) {
    return impl_->to_float(what, v);
  });
}

std::optional<std::vector<std::string>> HfModelDir::get_strings(std::string_view key) const {
  return impl_->to_list<std::string>(key, find(key), [this](std::string_view what, const auto& v) {
    return impl_->to_string(what, v);
  });
}

}  // namespace llms::gguf
