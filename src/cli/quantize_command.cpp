// cli/quantize_command: `llmserve quantize IN OUT --type TYPE
// [--method rtn|imatrix|gptq|smoothquant|awq|awq-gptq]
// [--imatrix FILE] [--calibration TEXT [--ctx N] [--chunks N] [--dampening F]
// [--hessian-memory SIZE] [--alpha A]] [--force]
// [-t THREADS]`.
//
// Rewrites a GGUF file (or a registered model's cached file, or a Hugging Face directory converted
// first: cli/hf_input.h) with its tensors in another type:
// round-to-nearest; with --imatrix weighted by an importance matrix where it has an entry; with
// --method smoothquant after smoothing activation outliers into the weights (quantize/smoothing.h);
// or with --method gptq by GPTQ, from Hessians gathered by running IN itself over the calibration
// text, a group of layers at a time under --hessian-memory (cli/grouped_hessians.h,
// quantize/hessian.h, quantize/gptq.h). Which tensor gets which
// type: quantize/quantize_plan.h; docs/QUANTIZE.md. A progress line per tensor and a one-line
// summary go to stderr; refusals (an existing OUT without --force, OUT equal to IN, an unknown
// type or method, flags of another method, ...) happen before any work and leave no file.
#include "quantize_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "calibration_run.h"
#include "engine_options.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"
#include "grouped_hessians.h"
#include "hf_input.h"
#include "model_registry.h"
#include "quantize/awq.h"
#include "quantize/hessian.h"
#include "quantize/model_quantizer.h"
#include "quantize/quantize_plan.h"
#include "quantize/smoothing.h"
#include "util/byte_size.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "util/thread_pool.h"

namespace llms::cli {
namespace {

struct QuantizeCommandOptions {
  std::string input;
  std::string output;
  std::string type;
  std::string cache_dir;
  std::string imatrix;
  std::string method;
  std::string calibration;
  int32_t ctx = 512;
  int64_t chunks = 0;
  bool chunks_given = false;
  double dampening = 0.01;
  bool dampening_given = false;
  double alpha = 0.5;
  bool alpha_given = false;
  std::string hessian_memory;  // empty: half of the available memory
  bool force = false;
  int threads = 0;
};

[[noreturn]] void refuse(const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, message);
}

bool gathers_hessians(const std::string& method) {
  return method == "gptq" || method == "awq" || method == "awq-gptq";
}

// The method, with the flags that belong to another one refused.
std::string check_method(const QuantizeCommandOptions& o) {
  std::string method = o.method;
  if (method.empty()) method = o.imatrix.empty() ? "rtn" : "imatrix";
  if (method != "rtn" && method != "imatrix" && method != "gptq" && method != "smoothquant" &&
      method != "awq" && method != "awq-gptq") {
    refuse("--method: '" + o.method +
           "' is not one of rtn, imatrix, gptq, smoothquant, awq, awq-gptq");
  }

  if (method == "imatrix" && o.imatrix.empty()) refuse("--method imatrix needs --imatrix FILE");
  if (method != "imatrix" && !o.imatrix.empty()) {
    refuse("--imatrix goes with --method imatrix, not " + method);
  }
  if ((method == "gptq" || method == "awq-gptq") && o.calibration.empty()) {
    refuse("--method " + method +
           " needs --calibration TEXT (the text its Hessians are gathered from)");
  }
  if (method == "smoothquant" && o.calibration.empty()) {
    refuse(
        "--method smoothquant needs --calibration TEXT (the text its activation ranges are "
        "gathered from)");
  }
  if (method == "awq" && o.calibration.empty()) {
    refuse(
        "--method awq needs --calibration TEXT (the text its activation statistics are "
        "gathered from)");
  }
  if (!gathers_hessians(method) && method != "smoothquant" && !o.calibration.empty()) {
    refuse("--calibration goes with --method gptq, smoothquant, awq or awq-gptq, not " + method);
  }
  if (method != "gptq" && method != "awq-gptq" && o.dampening_given) {
    refuse("--dampening goes with --method gptq or awq-gptq, not " + method);
  }
  if (!gathers_hessians(method) && !o.hessian_memory.empty()) {
    refuse("--hessian-memory goes with --method gptq, awq or awq-gptq, not " + method);
  }
  if (method != "smoothquant" && o.alpha_given) {
    refuse("--alpha goes with --method smoothquant, not " + method);
  }
  if (!(o.alpha >= 0.0 && o.alpha <= 1.0)) {
    refuse("--alpha: " + std::to_string(o.alpha) + " is not in [0, 1]");
  }
  if (o.chunks_given && o.chunks < 1) {
    refuse("--chunks: " + std::to_string(o.chunks) + " is not a positive number of chunks");
  }
  if (!(o.dampening > 0.0 && o.dampening <= 1.0)) {
    refuse("--dampening: " + std::to_string(o.dampening) + " is not in (0, 1]");
  }
  return method;
}

// The Hessian budget: --hessian-memory, or half of the memory available now.
uint64_t hessian_budget(const QuantizeCommandOptions& o) {
  if (!o.hessian_memory.empty()) {
    const auto bytes = parse_byte_size(o.hessian_memory);
    if (!bytes || *bytes == 0) {
      refuse("--hessian-memory: '" + o.hessian_memory +
             "' is not a positive size (e.g. 4GiB, 512MiB)");
    }
    return *bytes;
  }
  const int64_t available = available_memory_bytes();
  // Unknown (no /proc/meminfo): no bound, as before there was one.
  return available > 0 ? static_cast<uint64_t>(available) / 2 : UINT64_MAX;
}

CalibrationOptions calibration_options(const QuantizeCommandOptions& o,
                                       const quantize::QuantizeOptions& options,
                                       const std::string& tag) {
  CalibrationOptions calibration;
  calibration.text_file = o.calibration;
  calibration.text_flag = "--calibration";
  calibration.ctx = o.ctx;
  calibration.chunks = o.chunks;
  calibration.min_ctx = quantize::HessianCollector::kMinRows;
  calibration.threads = options.n_threads;
  calibration.tag = tag;
  return calibration;
}

// Runs the input over the calibration text for its activation ranges and plans the smoothing.
quantize::SmoothingPlan plan_smoothing(const QuantizeCommandOptions& o,
                                       const quantize::QuantizeOptions& options) {
  quantize::ActivationRangeCollector collector;
  run_calibration(options.input, calibration_options(o, options, "smoothquant"),
                  [&collector](const model::MatmulInput& input) {
                    collector.add(input.weight, input.data, input.n_rows, input.n_columns);
                  });
  const gguf::GgufFile file = gguf::GgufFile::open(options.input);
  quantize::SmoothingPlan plan = quantize::plan_smoothing(file, collector.take(), o.alpha);
  if (plan.n_groups == 0) {
    refuse("smoothquant: no layer of " + options.input.string() +
           " has an attention or feed-forward norm, or an up/down pair, to smooth");
  }
  fmt::print(stderr, "[smoothquant] {} groups smoothed (alpha {}), {} tensors rescaled\n",
             plan.n_groups, o.alpha, plan.rescales.size());
  return plan;
}

// Searches each layer's AWQ scales (quantize/awq.h) from `hessians`, which gathers them a group of
// layers at a time (under --hessian-memory) as it is asked, in layer order.
quantize::AwqPlan plan_awq(const quantize::QuantizeOptions& options, GroupedHessians& hessians) {
  const gguf::GgufFile file = gguf::GgufFile::open(options.input);
  const quantize::QuantizePlan plan = quantize::QuantizePlan::for_file(options.target, file);
  const std::vector<quantize::GptqTensor> tensors = quantize::awq_tensors(file);
  if (tensors.empty()) {
    refuse("awq: no layer of " + options.input.string() + " has a q, gate or down matrix");
  }
  ThreadPool pool(options.n_threads);
  quantize::AwqOptions awq_options;
  awq_options.pool = &pool;
  quantize::AwqPlan awq;
  std::vector<int64_t> layers;
  for (const quantize::GptqTensor& t : tensors) {
    if (layers.empty() || layers.back() != t.layer) layers.push_back(t.layer);
  }
  auto lookup = [&](const std::string& weight) -> const quantize::HessianSet::Entry* {
    for (const quantize::GptqTensor& t : tensors) {
      if (t.name == weight) return hessians.find(t);
    }
    return nullptr;
  };
  for (int64_t layer : layers) {
    const size_t first = awq.groups.size();
    quantize::plan_awq_layer(file, plan, layer, lookup, awq_options, awq);
    std::string line = fmt::format("[awq] layer {}:", layer);
    for (size_t g = first; g < awq.groups.size(); ++g) {
      const quantize::AwqGroup& group = awq.groups[g];
      // "blk.N.attn_norm.weight" -> "attn_norm"
      std::string producer = group.producer.substr(group.producer.find('.', 4) + 1);
      producer = producer.substr(0, producer.find('.'));
      line += fmt::format(" {} alpha {:.2f} (loss x{:.3f})", producer, group.alpha,
                          group.loss_rtn > 0 ? group.loss / group.loss_rtn : 1.0);
    }
    fmt::print(stderr, "{}\n", line);
  }
  size_t scaled = 0;
  for (const quantize::AwqGroup& g : awq.groups) scaled += g.alpha > 0;
  fmt::print(stderr, "[awq] {} of {} groups scaled, {} tensors rescaled\n", scaled,
             awq.groups.size(), awq.rescales.size());
  return awq;
}

// The tensors whose Hessians a method needs: GPTQ's, AWQ's (each layer's q, gate and down), or for
// awq-gptq both (AWQ's may be copies or F16 under the target, which GPTQ does not list), by layer.
std::vector<quantize::GptqTensor> hessian_tensors(const std::string& method,
                                                  const quantize::QuantizeOptions& options) {
  std::vector<quantize::GptqTensor> tensors;
  if (method != "awq") tensors = quantize::gptq_tensors(options);
  if (method != "gptq") {
    for (quantize::GptqTensor& t : quantize::awq_tensors(gguf::GgufFile::open(options.input))) {
      const bool listed =
          std::any_of(tensors.begin(), tensors.end(),
                      [&](const quantize::GptqTensor& u) { return u.name == t.name; });
      if (!listed) tensors.push_back(std::move(t));
    }
    std::stable_sort(tensors.begin(), tensors.end(),
                     [](const quantize::GptqTensor& a, const quantize::GptqTensor& b) {
                       return a.layer < b.layer;
                     });
  }
  return tensors;
}

// The Hessians of `tensors` (those GPTQ quantizes, or those AWQ searches with), gathered on demand.
GroupedHessians plan_hessians(const QuantizeCommandOptions& o,
                              const quantize::QuantizeOptions& options, const std::string& tag,
                              std::vector<quantize::GptqTensor> tensors) {
  const CalibrationOptions calibration = calibration_options(o, options, tag);
  const uint64_t budget = hessian_budget(o);
  GroupedHessians hessians(options.input, calibration, std::move(tensors), budget);
  const size_t n_groups = hessians.groups().size();
  uint64_t total = 0;
  for (const quantize::LayerGroup& g : hessians.groups()) total += g.hessian_bytes;
  if (n_groups > 1) {
    // awq-gptq asks for every group twice (AWQ's search, then GPTQ), each a calibration run.
    const size_t n_runs = tag == "awq-gptq" ? 2 * n_groups : n_groups;
    fmt::print(stderr,
               "[{}] Hessians take {} in all, over the budget of {}: {} calibration runs, {} per "
               "group of layers\n",
               tag, format_bytes(total), format_bytes(budget), n_runs,
               tag == "awq-gptq" ? "two" : "one");
  }
  return hessians;
}

int run_quantize(const QuantizeCommandOptions& o) {
  quantize::QuantizeOptions options;
  // The type and method first: a typo is refused before a model is looked up.
  options.target = quantize::parse_target(o.type);
  const std::string method = check_method(o);
  options.output = o.output;
  // A Hugging Face directory is converted to a GGUF file first (removed when this returns).
  std::unique_ptr<HfInput> hf_input;
  if (std::filesystem::is_directory(o.input)) {
    if (std::filesystem::exists(options.output) && !o.force) {
      refuse("output '" + o.output + "' already exists; pass --force to replace it");
    }
    hf_input = std::make_unique<HfInput>(o.input, options.output);
    options.input = hf_input->gguf();
  } else {
    options.input = resolve_model(o.input, o.cache_dir);
  }
  options.imatrix = o.imatrix;
  options.overwrite = o.force;
  options.n_threads = o.threads > 0 ? o.threads : physical_core_count();
  options.gptq_dampening = o.dampening;
  const std::string rescaled = method == "smoothquant" ? "smoothed" : "awq-scaled";
  options.on_tensor = [rescaled](const quantize::TensorProgress& p) {
    const std::string how = p.rescaled && p.uses_gptq ? " (" + rescaled + ", gptq)"
                            : p.rescaled              ? " (" + rescaled + ")"
                            : p.from == p.to          ? " (copied)"
                            : p.uses_imatrix          ? " (imatrix)"
                            : p.uses_gptq             ? " (gptq)"
                                                      : "";
    fmt::print(stderr, "[{:>4}/{}] {:<32} {:>5} -> {}{}\n", p.index + 1, p.n_tensors, p.name,
               gguf::ggml_type_name(p.from), gguf::ggml_type_name(p.to), how);
  };
  std::optional<GroupedHessians> hessians;
  quantize::AwqPlan awq;
  if (gathers_hessians(method)) {
    quantize::check_quantize_inputs(options);  // before minutes of calibration
    // GPTQ's tensors include those AWQ searches with (q, gate, down), so awq-gptq gathers one set
    // (one calibration run when it fits the budget). No tensor for GPTQ (e.g. an F16 target): no
    // group, and quantize_model refuses.
    hessians.emplace(plan_hessians(o, options, method, hessian_tensors(method, options)));
    if (method != "gptq") {
      awq = plan_awq(options, *hessians);
      options.rescales = &awq.rescales;
    }
    if (method == "awq") hessians.reset();  // not needed while quantizing
    if (method != "awq") {
      options.hessians = [&hessians](const quantize::GptqTensor& t) { return hessians->find(t); };
    }
  }
  quantize::SmoothingPlan smoothing;
  if (method == "smoothquant") {
    quantize::check_quantize_inputs(options);  // before the calibration run
    smoothing = plan_smoothing(o, options);
    options.rescales = &smoothing.rescales;
  }
  const quantize::QuantizeReport r = quantize::quantize_model(options);
  fmt::print(
      stderr,
      "quantized {} -> {} ({}): {} -> {}, {} tensors ({} converted, {} copied) in {:.1f} s\n",
      hf_input ? o.input : options.input.string(), options.output.string(),
      quantize::target_info(options.target).name, format_bytes(r.input_bytes),
      format_bytes(r.output_bytes), r.n_tensors, r.n_converted, r.n_copied, r.seconds);
  if (options.hessians) {
    fmt::print(stderr,
               "gptq: {} of the {} converted tensors quantized by GPTQ ({} Hessians); the others "
               "round-to-nearest\n",
               r.n_gptq, r.n_converted, hessians->n_distinct());
  }
  if (!options.imatrix.empty()) {
    fmt::print(stderr,
               "imatrix {}: {} of the {} converted tensors weighted by it ({} entries); the "
               "others round-to-nearest\n",
               options.imatrix.string(), r.n_imatrix, r.n_converted, r.n_imatrix_entries);
  }
  return 0;
}

}  // namespace

void add_quantize_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<QuantizeCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Rewrite a GGUF model (or convert a Hugging Face directory) with its weights in another "
      "type (round-to-nearest, weighted by an importance matrix, GPTQ, or smoothed)");
  cmd->add_option("IN", opts->input,
                  "GGUF file, registered model, or Hugging Face directory (safetensors, "
                  "config.json, tokenizer.json: llama, mistral, qwen2, qwen3)")
      ->required();
  cmd->add_option("OUT", opts->output, "GGUF file to write")->required();
  cmd->add_option(
         "--type", opts->type,
         "Target type, case-insensitive: " + quantize::target_names() + " (docs/QUANTIZE.md)")
      ->required();
  cmd->add_option("--imatrix", opts->imatrix,
                  "Importance matrix (from `llmserve imatrix` or llama-imatrix's GGUF): tensors "
                  "with an entry are quantized to minimise the error it weights");
  cmd->add_option("--method", opts->method,
                  "rtn, imatrix (with --imatrix; the default when it is given), gptq, "
                  "smoothquant, awq or awq-gptq (GPTQ on AWQ-scaled weights) (with "
                  "--calibration)");
  cmd->add_option("--calibration", opts->calibration,
                  "GPTQ, smoothquant, awq: UTF-8 text that IN runs over to gather each layer's "
                  "Hessian or activation ranges");
  cmd->add_option("--ctx", opts->ctx, "GPTQ, smoothquant, awq: tokens per calibration chunk")
      ->capture_default_str();
  CLI::Option* chunks =
      cmd->add_option("--chunks", opts->chunks,
                      "GPTQ, smoothquant, awq: calibration chunks (default: every whole chunk)");
  CLI::Option* dampening =
      cmd->add_option("--dampening", opts->dampening,
                      "GPTQ: fraction of the Hessian's mean diagonal added to it")
          ->capture_default_str();
  CLI::Option* alpha =
      cmd->add_option(
             "--alpha", opts->alpha,
             "smoothquant: how much of the activations' range moves into the weights (0-1)")
          ->capture_default_str();
  cmd->add_option(
      "--hessian-memory", opts->hessian_memory,
      "GPTQ, awq: most memory the Hessians may take at once, e.g. 4GiB (default: half of "
      "the available memory); over it, one calibration run per group of layers that "
      "fits");
  cmd->add_flag("--force", opts->force, "Replace OUT when it exists");
  add_threads_option(*cmd, opts->threads);
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->callback([opts, chunks, dampening, alpha, &exit_code] {
    opts->chunks_given = chunks->count() > 0;
    opts->dampening_given = dampening->count() > 0;
    opts->alpha_given = alpha->count() > 0;
    exit_code = run_quantize(*opts);
  });
}

}  // namespace llms::cli
