// `llmserve inspect MODEL`: what a model file holds and what serving it will cost in memory.
//
// The report is built once as JSON; text output is a rendering of the same JSON, so `--json` and
// the human view never disagree.
#include "inspect_command.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cuda/cuda_backend.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "gguf/hf_model_dir.h"
#include "gguf/safetensors_file.h"
#include "kv/kv_budget.h"
#include "model/model_config.h"
#include "model_registry.h"
#include "util/byte_size.h"
#include "util/error.h"

namespace llms::cli {

namespace {

using json = nlohmann::ordered_json;

struct InspectOptions {
  std::string model;
  std::string cache_dir;
  bool as_json = false;
  bool no_tensors = false;
  uint64_t n_ctx = 0;  // 0: the model's training context
  uint64_t batch = 32;
  std::string memory;  // empty: physical memory of this machine
  std::string kv_type = "f16";
  std::string device = "cpu";  // cpu, cuda or cuda:N: whose memory the budget is
  double gpu_memory_utilization = 0.9;
};

uint64_t physical_memory_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page_size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * page_size : 0;
}

json tokenizer_summary(const gguf::GgufFile& file) {
  json t = json::object();
  auto model = file.get_string("tokenizer.ggml.model");
  if (!model) return t;
  t["model"] = *model;
  t["pre"] = file.get_string("tokenizer.ggml.pre").value_or("");
  if (auto tokens = file.find("tokenizer.ggml.tokens")) t["n_vocab"] = tokens->size();
  if (auto merges = file.find("tokenizer.ggml.merges")) t["n_merges"] = merges->size();
  t["has_scores"] = file.find("tokenizer.ggml.scores") != nullptr;
  for (const char* id : {"bos", "eos", "unknown", "padding"}) {
    std::string key = std::string("tokenizer.ggml.") + id + "_token_id";
    if (auto v = file.get_uint(key)) t[std::string(id) + "_id"] = *v;
  }
  if (auto v = file.get_bool("tokenizer.ggml.add_bos_token")) t["add_bos"] = *v;
  auto tmpl = file.get_string("tokenizer.chat_template");
  t["chat_template_bytes"] = tmpl ? tmpl->size() : 0;
  return t;
}

struct TensorRow {
  std::string name;
  std::string type;
  std::vector<uint64_t> shape;
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
};

// What one source (a GGUF file or a Hugging Face directory) tells; the report is built from it.
struct ModelFacts {
  json file;
  model::ModelConfig cfg;
  json tokenizer = json::object();
  json metadata = json::object();
  std::vector<TensorRow> tensors;
  std::string shape_order;  // how the shape lists dimensions
};

ModelFacts gguf_facts(const std::filesystem::path& path) {
  gguf::GgufFile file = gguf::GgufFile::open(path);
  ModelFacts f;
  f.cfg = model::ModelConfig::from_gguf(file);
  f.file = {{"path", path.string()},
            {"format", "gguf"},
            {"bytes", file.file_size()},
            {"gguf_version", file.version()},
            {"alignment", file.alignment()},
            {"n_metadata", file.metadata().size()},
            {"n_tensors", file.tensors().size()},
            {"data_offset", file.data_offset()}};
  f.tokenizer = tokenizer_summary(file);
  for (const auto& kv : file.metadata()) f.metadata[kv.key] = kv.value.to_display_string(4);
  for (const auto& t : file.tensors()) {
    f.tensors.push_back({t.name, std::string(gguf::ggml_type_name(t.type)),
                         std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), t.n_elements,
                         t.n_bytes});
  }
  f.shape_order = "ne[0] first (contiguous dimension first)";
  return f;
}

json hf_tokenizer_summary(const gguf::HfModelDir& dir) {
  json t = json::object();
  if (const auto* tok = dir.tokenizer()) {
    const auto* model = tok->contains("model") ? &(*tok)["model"] : nullptr;
    if (model && model->is_object()) {
      if (model->contains("type") && (*model)["type"].is_string()) t["model"] = (*model)["type"];
      if (model->contains("vocab") &&
          ((*model)["vocab"].is_object() || (*model)["vocab"].is_array())) {
        t["n_vocab"] = (*model)["vocab"].size();
      }
      if (model->contains("merges") && (*model)["merges"].is_array()) {
        t["n_merges"] = (*model)["merges"].size();
      }
    }
    if (tok->contains("added_tokens") && (*tok)["added_tokens"].is_array()) {
      t["n_added_tokens"] = (*tok)["added_tokens"].size();
    }
  }
  if (const auto* cfg = dir.tokenizer_config()) {
    for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
      if (cfg->contains(key) && (*cfg)[key].is_string()) t[key] = (*cfg)[key];
    }
    if (cfg->contains("chat_template") && (*cfg)["chat_template"].is_string()) {
      t["chat_template_bytes"] = (*cfg)["chat_template"].get_ref<const std::string&>().size();
    }
  }
  return t;
}

ModelFacts hf_facts(const std::filesystem::path& path) {
  gguf::HfModelDir dir = gguf::HfModelDir::open(path);
  ModelFacts f;
  f.cfg = model::ModelConfig::from_hf(dir);
  const auto& weights = dir.weights();
  uint64_t bytes = 0;
  for (size_t i = 0; i < weights.n_shards(); ++i) bytes += weights.shard(i).file_size();
  f.file = {{"path", path.string()},
            {"format", "safetensors"},
            {"bytes", bytes},
            {"n_shards", weights.n_shards()},
            {"n_tensors", weights.tensors().size()}};
  f.tokenizer = hf_tokenizer_summary(dir);
  for (const auto& [key, value] : dir.config().items()) {
    std::string shown = value.dump();
    f.metadata[key] = shown.size() > 120 ? shown.substr(0, 117) + "..." : shown;
  }
  for (const auto& entry : weights.tensors()) {
    const auto& t = *entry.tensor;
    f.tensors.push_back(
        {t.name, std::string(gguf::dtype_name(t.dtype)), t.shape, t.n_elements, t.n_bytes});
  }
  f.shape_order = "row-major (outermost dimension first)";
  return f;
}

// The engine's default block size: the pool's blocks are counted in these.
constexpr uint64_t kInspectBlockSize = 16;

struct DeviceBudget {
  uint64_t bytes = 0;
  std::string name;  // "cuda:0, NVIDIA H200"
};

// --device cuda[:N]: the card's memory times --gpu-memory-utilization, less what the CUDA
// runner keeps out of every budget, as the runner sizes its pool (its step buffers, a few
// hundred MB, not counted). No device: refused with the probe's reason, as `run` refuses.
DeviceBudget device_budget(const InspectOptions& opts, kv::KvCacheType kv_type) {
  engine::EngineConfig config;
  DeviceOptions device_options;
  device_options.device = opts.device;
  device_options.gpu_memory_utilization = opts.gpu_memory_utilization;
  set_device(device_options, config);
  if (config.device != engine::Device::kCuda) return {physical_memory_bytes(), "cpu"};
  if (kv_type != kv::KvCacheType::kF16) {
    throw Error(Error::Kind::kUnsupported,
                fmt::format("--kv-type {}: the CUDA runner keeps an f16 KV cache only",
                            kv::kv_cache_type_name(kv_type)));
  }
  const cuda::Probe probe = cuda::probe();
  if (probe.devices.empty()) {
    throw Error(Error::Kind::kUnavailable, "--device " + opts.device + ": " + probe.why_none);
  }
  for (const cuda::DeviceInfo& d : probe.devices) {
    if (d.index != config.cuda_device) continue;
    const double usable = static_cast<double>(d.total_bytes) * opts.gpu_memory_utilization -
                          static_cast<double>(cuda::kDeviceReserveBytes);
    return {usable > 0.0 ? static_cast<uint64_t>(usable) : 0,
            fmt::format("cuda:{}, {}", d.index, d.name)};
  }
  throw Error(Error::Kind::kInvalidArgument,
              fmt::format("--device {}: this machine has {} CUDA device(s)", opts.device,
                          probe.devices.size()));
}

json build_report(const std::filesystem::path& path, const InspectOptions& opts) {
  ModelFacts facts = std::filesystem::is_directory(path) ? hf_facts(path) : gguf_facts(path);
  const model::ModelConfig& cfg = facts.cfg;

  json r;
  r["file"] = facts.file;
  r["architecture"] = cfg.architecture;
  r["name"] = cfg.name;
  json kv_heads = cfg.n_kv_heads.empty() ? json(0) : json(cfg.n_kv_heads.front());
  if (std::adjacent_find(cfg.n_kv_heads.begin(), cfg.n_kv_heads.end(), std::not_equal_to<>()) !=
      cfg.n_kv_heads.end()) {
    kv_heads = cfg.n_kv_heads;
  }
  uint64_t n_sliding = std::count(cfg.is_sliding.begin(), cfg.is_sliding.end(), true);
  r["hyperparameters"] = {{"n_layers", cfg.n_layers},
                          {"n_embd", cfg.n_embd},
                          {"n_ff", cfg.n_ff},
                          {"n_heads", cfg.n_heads},
                          {"n_kv_heads", kv_heads},
                          {"head_dim_k", cfg.head_dim_k},
                          {"head_dim_v", cfg.head_dim_v},
                          {"n_ctx_train", cfg.n_ctx_train},
                          {"n_vocab", cfg.n_vocab},
                          {"rope_freq_base", cfg.rope_freq_base},
                          {"rope_scaling", cfg.rope_scaling_type},
                          {"rms_norm_eps", cfg.rms_norm_eps},
                          {"sliding_window", cfg.sliding_window},
                          {"n_sliding_layers", n_sliding},
                          {"tied_output", !cfg.has_output_weight}};
  r["tokenizer"] = facts.tokenizer;
  r["metadata"] = facts.metadata;

  struct TypeTotals {
    uint64_t n_tensors = 0, n_params = 0, bytes = 0;
  };
  std::map<std::string, TypeTotals> by_type;
  uint64_t n_params = 0, weight_bytes = 0;
  json tensors = json::array();
  for (const auto& t : facts.tensors) {
    auto& tt = by_type[t.type];
    ++tt.n_tensors;
    tt.n_params += t.n_elements;
    tt.bytes += t.n_bytes;
    n_params += t.n_elements;
    weight_bytes += t.n_bytes;
    tensors.push_back(
        {{"name", t.name}, {"type", t.type}, {"shape", t.shape}, {"bytes", t.n_bytes}});
  }
  json types = json::array();
  for (const auto& [name, tt] : by_type) {
    types.push_back({{"type", name},
                     {"n_tensors", tt.n_tensors},
                     {"n_params", tt.n_params},
                     {"bytes", tt.bytes}});
  }
  r["parameters"] = {{"n_params", n_params}, {"bytes", weight_bytes}, {"by_type", types}};
  r["shape_order"] = facts.shape_order;
  if (!opts.no_tensors) r["tensors"] = tensors;

  auto kv_type = kv::kv_cache_type_from_name(opts.kv_type);
  if (!kv_type) {
    throw Error(Error::Kind::kInvalidArgument, "--kv-type '" + opts.kv_type + "' is not one of " +
                                                   std::string(kv::kv_cache_type_names()));
  }
  uint64_t memory = physical_memory_bytes();
  std::string device = "cpu";
  if (opts.device != "cpu") {
    const DeviceBudget d = device_budget(opts, *kv_type);
    memory = d.bytes;
    device = d.name;
  }
  if (!opts.memory.empty()) {
    auto parsed = parse_byte_size(opts.memory);
    if (!parsed) {
      throw Error(Error::Kind::kInvalidArgument,
                  "--memory '" + opts.memory + "' is not a byte size (e.g. 24GiB)");
    }
    memory = *parsed;
  }
  uint64_t n_ctx = opts.n_ctx ? opts.n_ctx : (cfg.n_ctx_train ? cfg.n_ctx_train : 4096);
  kv::KvShape shape = cfg.kv_shape();
  json per_token = json::object();
  for (auto t : {kv::KvCacheType::kF32, kv::KvCacheType::kF16, kv::KvCacheType::kInt8,
                 kv::KvCacheType::kFp8}) {
    per_token[std::string(kv::kv_cache_type_name(t))] = kv::kv_bytes_per_token(shape, t);
  }
  uint64_t per_sequence = kv::kv_bytes_per_sequence(shape, *kv_type, n_ctx);
  const uint64_t per_block = kv::kv_bytes_per_token(shape, *kv_type) * kInspectBlockSize;
  const uint64_t blocks =
      memory > weight_bytes && per_block > 0 ? (memory - weight_bytes) / per_block : 0;
  r["kv_cache"] = {
      {"cache_type", kv::kv_cache_type_name(*kv_type)},
      {"formula",
       "layers x kv_heads x (2 x head_dim x bytes_per_element + 2 x scale_bytes) (per token; "
       "int8 and fp8 keep a 2-byte scale per key and value vector)"},
      {"bytes_per_token", kv::kv_bytes_per_token(shape, *kv_type)},
      {"bytes_per_token_by_type", per_token},
      {"context", n_ctx},
      {"bytes_per_sequence", per_sequence},
      {"batch", opts.batch},
      {"bytes_for_batch", per_sequence * opts.batch},
      {"bytes_per_sequence_without_gqa",
       kv::kv_bytes_per_sequence(shape.with_kv_heads(cfg.n_heads), *kv_type, n_ctx)},
      {"device", device},
      {"memory_budget", memory},
      {"weights_bytes", weight_bytes},
      {"block_size", kInspectBlockSize},
      {"bytes_per_block", per_block},
      {"blocks", blocks},
      {"max_sequences", kv::max_sequences(shape, *kv_type, n_ctx, memory, weight_bytes)},
  };
  return r;
}

std::string shape_string(const json& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += " x ";
    s += std::to_string(shape[i].get<uint64_t>());
  }
  return s;
}

void print_text(const json& r) {
  const json& f = r["file"];
  fmt::print("File        {}\n", f["path"].get<std::string>());
  std::string format =
      f.contains("gguf_version")
          ? fmt::format("GGUF v{}, {} metadata keys, alignment {}", f["gguf_version"].get<int>(),
                        f["n_metadata"].get<uint64_t>(), f["alignment"].get<uint64_t>())
          : fmt::format("safetensors, {} shard(s)", f["n_shards"].get<uint64_t>());
  fmt::print("            {} ({} bytes), {}, {} tensors\n", format_bytes(f["bytes"]),
             f["bytes"].get<uint64_t>(), format, f["n_tensors"].get<uint64_t>());
  fmt::print("Model       {} ({})\n\n", r["name"].get<std::string>(),
             r["architecture"].get<std::string>());

  fmt::print("Hyper-parameters\n");
  for (const auto& [k, v] : r["hyperparameters"].items()) fmt::print("  {:<18} {}\n", k, v.dump());

  fmt::print("\nTokenizer\n");
  if (r["tokenizer"].empty()) fmt::print("  (none in file)\n");
  for (const auto& [k, v] : r["tokenizer"].items()) fmt::print("  {:<18} {}\n", k, v.dump());

  fmt::print("\nMetadata\n");
  for (const auto& [k, v] : r["metadata"].items()) {
    fmt::print("  {:<44} {}\n", k, v.get<std::string>());
  }

  if (r.contains("tensors")) {
    fmt::print("\nTensors (shape {})\n  {:<36} {:<6} {:<22} {:>12}\n",
               r["shape_order"].get<std::string>(), "name", "type", "shape", "bytes");
    for (const auto& t : r["tensors"]) {
      fmt::print("  {:<36} {:<6} {:<22} {:>12}\n", t["name"].get<std::string>(),
                 t["type"].get<std::string>(), shape_string(t["shape"]),
                 t["bytes"].get<uint64_t>());
    }
  }

  const json& p = r["parameters"];
  fmt::print("\nParameters  {} ({:.3f} B), {} of weights\n", p["n_params"].get<uint64_t>(),
             p["n_params"].get<uint64_t>() / 1e9, format_bytes(p["bytes"]));
  for (const auto& t : p["by_type"]) {
    fmt::print("  {:<8} {:>4} tensors {:>14} params {:>12}\n", t["type"].get<std::string>(),
               t["n_tensors"].get<uint64_t>(), t["n_params"].get<uint64_t>(),
               format_bytes(t["bytes"]));
  }

  const json& kv = r["kv_cache"];
  std::string type = kv["cache_type"];
  fmt::print("\nKV cache ({}; {})\n", type, kv["formula"].get<std::string>());
  std::string per_type;
  for (const auto& [k, v] : kv["bytes_per_token_by_type"].items()) {
    per_type += fmt::format("{}{} {}", per_type.empty() ? "" : ", ", k, format_bytes(v));
  }
  fmt::print("  per token            {} ({} bytes)   [{}]\n", format_bytes(kv["bytes_per_token"]),
             kv["bytes_per_token"].get<uint64_t>(), per_type);
  fmt::print("  per sequence         {} at {} tokens (without GQA sharing: {})\n",
             format_bytes(kv["bytes_per_sequence"]), kv["context"].get<uint64_t>(),
             format_bytes(kv["bytes_per_sequence_without_gqa"]));
  const json& hp = r["hyperparameters"];
  if (hp["n_sliding_layers"].get<uint64_t>() > 0) {
    fmt::print(
        "                       ({} of {} layers use a sliding window and hold at most {} "
        "tokens)\n",
        hp["n_sliding_layers"].get<uint64_t>(), hp["n_layers"].get<uint64_t>(),
        hp["sliding_window"].get<uint64_t>());
  }
  fmt::print("  batch of {:<10} {}\n", kv["batch"].get<uint64_t>(),
             format_bytes(kv["bytes_for_batch"]));
  fmt::print(
      "  budget ({})  {} memory - {} weights -> {} blocks of {} tokens, {} sequences of {} "
      "tokens\n",
      kv["device"].get<std::string>(), format_bytes(kv["memory_budget"]),
      format_bytes(kv["weights_bytes"]), kv["blocks"].get<uint64_t>(),
      kv["block_size"].get<uint64_t>(), kv["max_sequences"].get<uint64_t>(),
      kv["context"].get<uint64_t>());
}

int run_inspect(const InspectOptions& opts) {
  auto path = resolve_model(opts.model, opts.cache_dir);
  json report = build_report(path, opts);
  if (opts.as_json) {
    std::puts(report.dump(2).c_str());
  } else {
    print_text(report);
  }
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<InspectOptions>();
  auto* cmd = app.add_subcommand("inspect", "Show a model file's contents and KV-cache arithmetic");
  cmd->add_option("model", opts->model, "GGUF file, or a registered model name")->required();
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->add_flag("--json", opts->as_json, "Print the report as JSON");
  cmd->add_flag("--no-tensors", opts->no_tensors, "Leave out the tensor table");
  cmd->add_option("--ctx", opts->n_ctx, "Context length for the KV figures (default: the model's)");
  cmd->add_option("--batch", opts->batch, "Sequences in a batch for the KV figures")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--memory", opts->memory,
                  "Memory budget, e.g. 24GiB (default: this machine's RAM)");
  cmd->add_option("--kv-type", opts->kv_type,
                  "KV cache element type: " + std::string(kv::kv_cache_type_names()));
  cmd->add_option("--device", opts->device,
                  "Whose memory the budget is: cpu (this machine's RAM), cuda or cuda:N (the "
                  "GPU's, as the CUDA runner sizes its KV pool)")
      ->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", opts->gpu_memory_utilization,
                  "With --device cuda: the share of the GPU's memory to use, as in serve")
      ->capture_default_str();
  cmd->callback([opts, &exit_code] { exit_code = run_inspect(*opts); });
}

}  // namespace llms::cli
