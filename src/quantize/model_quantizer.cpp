// quantize/model_quantizer: see model_quantizer.h for the contract. Every refusal happens before
// the file is written, most before the first tensor is converted (a Hessian of the wrong width
// only when the lookup gives it), so a bad invocation leaves nothing behind.
#include "quantize/model_quantizer.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"
#include "quantize/gptq.h"
#include "quantize/importance_matrix.h"
#include "quantize/smoothing.h"
#include "quantize/weighted_quantizers.h"
#include "util/checked_math.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::quantize {

namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;

// The block layouts written are those of llama.cpp's GGML_QNT_VERSION 2.
constexpr uint32_t kQuantizationVersion = 2;

// llama-quantize's record of the importance matrix a file was made with.
constexpr std::string_view kImatrixFileKey = "quantize.imatrix.file";
constexpr std::string_view kImatrixDatasetKey = "quantize.imatrix.dataset";
constexpr std::string_view kImatrixEntriesKey = "quantize.imatrix.entries_count";
constexpr std::string_view kImatrixChunksKey = "quantize.imatrix.chunks_count";

[[noreturn]] void refuse(std::string message) {
  throw Error(Error::Kind::kInvalidArgument, std::move(message));
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

fs::path directory_of(const fs::path& file) {
  fs::path dir = file.parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

void check_paths(const QuantizeOptions& o) {
  if (o.n_threads < 1) {
    refuse("quantize: thread count must be at least 1, got " + std::to_string(o.n_threads));
  }
  const fs::path dir = directory_of(o.output);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) refuse("output directory " + quoted(dir) + " does not exist");
  if (!fs::exists(o.output, ec)) return;
  if (fs::equivalent(o.input, o.output, ec)) {
    refuse(quoted(o.output) + " is the input file; write the output to another path");
  }
  if (fs::is_directory(o.output, ec)) refuse("output " + quoted(o.output) + " is a directory");
  if (!o.overwrite) {
    refuse("output " + quoted(o.output) + " already exists; pass --force to replace it");
  }
}

uint64_t free_bytes(const QuantizeOptions& o, const fs::path& dir) {
  if (o.free_space) return o.free_space(dir);
  std::error_code ec;
  const fs::space_info space = fs::space(dir, ec);
  if (ec) {
    throw Error(Error::Kind::kIo,
                "cannot read the free space of " + quoted(dir) + ": " + ec.message());
  }
  return space.available;
}

void check_free_space(const QuantizeOptions& o, uint64_t needed) {
  const fs::path dir = directory_of(o.output);
  const uint64_t available = free_bytes(o, dir);
  if (available < needed) {
    refuse("not enough free space in " + quoted(dir) + " for " + quoted(o.output) + ": it needs " +
           std::to_string(needed) + " bytes, " + std::to_string(available) + " are available");
  }
}

// One tensor of the output: its input, its planned type and its size.
struct TensorJob {
  const gguf::TensorInfo* input;
  GgmlType type;
  uint64_t n_rows;
  uint64_t n_bytes;
  const ImportanceMatrix::Entry* importance = nullptr;  // quantize with its weights when set
  const TensorRescale* rescale = nullptr;               // values rescaled first when set
  bool is_copy() const { return type == input->type && !rescale; }
};

std::string type_name(GgmlType type) { return std::string(gguf::ggml_type_name(type)); }

std::vector<TensorJob> plan_tensors(const gguf::GgufFile& file, const QuantizePlan& plan) {
  std::vector<TensorJob> jobs;
  jobs.reserve(file.tensors().size());
  for (const gguf::TensorInfo& t : file.tensors()) {
    TensorJob job{&t, plan.type_for(t), t.n_elements / t.ne[0], t.n_bytes};
    if (!job.is_copy()) {
      if (!quant::can_dequantize(t.type)) {
        throw Error(Error::Kind::kUnsupported,
                    "tensor '" + t.name + "' is stored as " + type_name(t.type) +
                        ", which quantize cannot read; it would be written as " +
                        type_name(job.type));
      }
      const auto bytes = checked_mul(
          quant::quantized_row_bytes(job.type, static_cast<int64_t>(t.ne[0])), job.n_rows);
      if (!bytes) {
        throw Error(Error::Kind::kInvalidFile, "tensor '" + t.name + "': size overflows 64 bits");
      }
      job.n_bytes = *bytes;
    }
    jobs.push_back(job);
  }
  return jobs;
}

// Gives each converted tensor the imatrix entry of its name when its type has a weighted
// quantizer. Refuses an entry whose width is not its tensor's, and an
// imatrix no tensor uses (see model_quantizer.h).
void attach_importance(std::vector<TensorJob>& jobs, const ImportanceMatrix& matrix,
                       const QuantizeOptions& o) {
  const std::string file = "imatrix " + quoted(o.imatrix);
  size_t n_named = 0;
  size_t n_used = 0;
  for (TensorJob& job : jobs) {
    const gguf::TensorInfo& t = *job.input;
    const ImportanceMatrix::Entry* entry = matrix.find(t.name);
    if (!entry) continue;
    ++n_named;
    if (entry->sum_squares.size() != t.ne[0]) {
      refuse(file + ": entry '" + t.name + "' has " + std::to_string(entry->sum_squares.size()) +
             " columns, but the model's tensor '" + t.name + "' has " + std::to_string(t.ne[0]) +
             " (ne[0]); was it made for another model?");
    }
    if (job.is_copy() || !has_weighted_quantizer(job.type)) continue;
    job.importance = entry;
    ++n_used;
  }
  if (n_used > 0) return;
  if (n_named == 0) {
    refuse(file + " has no entry for any tensor of " + quoted(o.input) + " (its " +
           std::to_string(matrix.entries.size()) + " entries name e.g. '" +
           matrix.entries.begin()->first + "'): it was made for another model");
  }
  refuse(file + ": none of the " + std::to_string(n_named) +
         " tensors it names is converted to a type with a weighted quantizer (Q4_0, Q5_0, Q8_0, "
         "Q4_K, Q5_K, Q6_K) here; quantize without --imatrix");
}

// Gives each tensor its rescale; refuses one whose shape it does not fit.
void attach_rescales(std::vector<TensorJob>& jobs, const TensorRescales& rescales) {
  for (TensorJob& job : jobs) {
    const gguf::TensorInfo& t = *job.input;
    const auto it = rescales.find(t.name);
    if (it == rescales.end()) continue;
    const TensorRescale& r = it->second;
    if ((!r.column.empty() && r.column.size() != t.ne[0]) ||
        (!r.row.empty() && r.row.size() != job.n_rows)) {
      refuse("rescale of '" + t.name + "' does not fit its shape");
    }
    if (!quant::can_dequantize(t.type)) {
      throw Error(Error::Kind::kUnsupported, "tensor '" + t.name + "' is stored as " +
                                                 type_name(t.type) +
                                                 ", which quantize cannot read");
    }
    job.rescale = &r;
  }
}

bool gptq_may_quantize(const TensorJob& job) {
  return !job.is_copy() && has_gptq_quantizer(job.type) && job.input->n_dims == 2 &&
         (layer_of(job.input->name).has_value() || job.input->name == kOutputHead);
}

// Where the output head runs: one past the last "blk.N." layer.
int64_t output_head_layer(const std::vector<TensorJob>& jobs) {
  int64_t last = -1;
  for (const TensorJob& job : jobs) last = std::max(last, layer_of(job.input->name).value_or(-1));
  return last + 1;
}

// The layer of a tensor GPTQ may quantize (output_head_layer for the output head).
int64_t gptq_layer(const TensorJob& job, int64_t head_layer) {
  return layer_of(job.input->name).value_or(head_layer);
}

GptqTensor gptq_tensor_of(const TensorJob& job, int64_t head_layer) {
  return GptqTensor{job.input->name, gptq_layer(job, head_layer),
                    static_cast<int64_t>(job.input->ne[0])};
}

// The jobs GPTQ may quantize, as indices into `jobs`, by layer (stable within a layer).
std::vector<size_t> gptq_job_order(const std::vector<TensorJob>& jobs) {
  const int64_t head_layer = output_head_layer(jobs);
  std::vector<size_t> order;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (gptq_may_quantize(jobs[i])) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return gptq_layer(jobs[a], head_layer) < gptq_layer(jobs[b], head_layer);
  });
  return order;
}

// The record llama-quantize leaves of an imatrix (or its absence: a record copied from the
// input would describe another quantization).
void record_importance(gguf::GgufWriter& writer, const ImportanceMatrix* matrix,
                       const fs::path& path) {
  for (std::string_view key :
       {kImatrixFileKey, kImatrixDatasetKey, kImatrixEntriesKey, kImatrixChunksKey}) {
    writer.erase(key);
  }
  if (!matrix) return;
  writer.set_string(kImatrixFileKey, path.string());
  if (!matrix->datasets.empty()) writer.set_string(kImatrixDatasetKey, matrix->datasets.front());
  writer.set_i32(kImatrixEntriesKey, static_cast<int32_t>(matrix->entries.size()));
  writer.set_i32(kImatrixChunksKey, static_cast<int32_t>(matrix->chunk_count));
}

uint64_t align_up(uint64_t value, uint64_t alignment) {
  const auto aligned = checked_align_up(value, alignment);
  if (!aligned) throw Error(Error::Kind::kInvalidFile, "quantize: output size overflows 64 bits");
  return *aligned;
}

uint64_t add_bytes(uint64_t a, uint64_t b) {
  const auto sum = checked_add(a, b);
  if (!sum) throw Error(Error::Kind::kInvalidFile, "quantize: output size overflows 64 bits");
  return *sum;
}

// An upper bound of the output's size, before any tensor exists: `metadata_only` holds the
// metadata, each tensor adds its info record (name, dimensions, type, offset, as GGUF lays it out;
// see gguf_writer.h) and its aligned data. The bound is exact up to the alignment padding of the
// header, which is at most alignment - 1 bytes.
uint64_t planned_file_size(const gguf::GgufWriter& metadata_only,
                           const std::vector<TensorJob>& jobs) {
  uint64_t size = metadata_only.file_size();
  for (const TensorJob& job : jobs) {
    const uint64_t info_bytes = sizeof(uint64_t) + job.input->name.size() + sizeof(uint32_t) +
                                sizeof(uint64_t) * job.input->n_dims + sizeof(uint32_t) +
                                sizeof(uint64_t);
    size = add_bytes(size, info_bytes);
    size = add_bytes(size, align_up(job.n_bytes, metadata_only.alignment()));
  }
  return size;
}

void rescale_row(const TensorRescale& rescale, uint64_t index, float* row, int64_t length) {
  const float row_scale = rescale.row.empty() ? 1.0f : rescale.row[index];
  for (int64_t j = 0; j < length; ++j) {
    const float column_scale =
        rescale.column.empty() ? 1.0f : rescale.column[static_cast<size_t>(j)];
    row[j] *= row_scale * column_scale;
  }
}

// Dequantizes the whole tensor, then GPTQ quantizes it: rows over the pool both times (the
// factorization's matrix products have BLAS threads of their own).
std::vector<uint8_t> convert_tensor_gptq(const TensorJob& job, const HessianSet::Entry& hessian,
                                         std::span<const uint8_t> input, ThreadPool& pool,
                                         double dampening) {
  const gguf::TensorInfo& t = *job.input;
  const auto row_length = static_cast<int64_t>(t.ne[0]);
  const auto n_rows = static_cast<int64_t>(job.n_rows);
  const uint64_t in_row_bytes = quant::quantized_row_bytes(t.type, row_length);
  std::vector<float> weights(static_cast<size_t>(n_rows * row_length));
  pool.parallel_for(n_rows, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      quant::dequantize_row(t.type, input.data() + static_cast<uint64_t>(r) * in_row_bytes,
                            weights.data() + r * row_length, row_length);
      if (job.rescale)
        rescale_row(*job.rescale, static_cast<uint64_t>(r), weights.data() + r * row_length,
                    row_length);
    }
  });
  pool.rest();
  // A rescaled tensor reads x / column (its producer was divided): its Hessian is
  // diag(1/column) H diag(1/column). Row factors scale outputs, not inputs.
  const float* h = hessian.h.data();
  std::vector<float> rescaled_h;
  if (job.rescale && !job.rescale->column.empty()) {
    const std::vector<float>& c = job.rescale->column;
    rescaled_h.resize(hessian.h.size());
    for (int64_t i = 0; i < row_length; ++i) {
      for (int64_t j = 0; j < row_length; ++j) {
        rescaled_h[static_cast<size_t>(i * row_length + j)] =
            hessian.h[static_cast<size_t>(i * row_length + j)] /
            (c[static_cast<size_t>(i)] * c[static_cast<size_t>(j)]);
      }
    }
    h = rescaled_h.data();
  }
  std::vector<uint8_t> output(job.n_bytes);
  gptq_quantize(job.type, weights.data(), n_rows, row_length, h, output.data(),
                GptqOptions{dampening, pool.size(), &pool});
  return output;
}

// Dequantizes and re-quantizes one tensor row by row (with the importance matrix's weights when the
// job has an entry); rows are spread over the pool, each thread with its own f32 row in `scratch`.
std::vector<uint8_t> convert_tensor(const TensorJob& job, std::span<const uint8_t> input,
                                    ThreadPool& pool, std::vector<std::vector<float>>& scratch) {
  const gguf::TensorInfo& t = *job.input;
  const auto row_length = static_cast<int64_t>(t.ne[0]);
  const uint64_t in_row_bytes = quant::quantized_row_bytes(t.type, row_length);
  const uint64_t out_row_bytes = quant::quantized_row_bytes(job.type, row_length);
  std::vector<uint8_t> output(job.n_bytes);
  for (auto& row : scratch) row.resize(static_cast<size_t>(row_length));
  // The mean squared activation of each column: what the weights are made from.
  std::vector<float> importance;
  if (job.importance) {
    const auto n_tokens = static_cast<double>(job.importance->n_tokens);
    for (float sum : job.importance->sum_squares) {
      importance.push_back(static_cast<float>(sum / n_tokens));
    }
  }
  pool.parallel_for(static_cast<int64_t>(job.n_rows), [&](int64_t begin, int64_t end, int thread) {
    float* row = scratch[static_cast<size_t>(thread)].data();
    for (int64_t r = begin; r < end; ++r) {
      const auto index = static_cast<uint64_t>(r);
      quant::dequantize_row(t.type, input.data() + index * in_row_bytes, row, row_length);
      if (job.rescale) rescale_row(*job.rescale, index, row, row_length);
      uint8_t* out = output.data() + index * out_row_bytes;
      if (job.importance) {
        quantize_row_with_importance(job.type, row, importance.data(), out, row_length);
      } else {
        quant::quantize_row(job.type, row, out, row_length);
      }
    }
  });
  return output;
}

}  // namespace

void check_quantize_inputs(const QuantizeOptions& options) {
  check_paths(options);
  const gguf::GgufFile input = gguf::GgufFile::open(options.input);
  const QuantizePlan plan = QuantizePlan::for_file(options.target, input);
  const std::vector<TensorJob> jobs = plan_tensors(input, plan);
  gguf::GgufWriter writer;
  writer.copy_metadata(input);
  check_free_space(options, planned_file_size(writer, jobs));
}

std::vector<GptqTensor> gptq_tensors(const QuantizeOptions& options) {
  const gguf::GgufFile input = gguf::GgufFile::open(options.input);
  const std::vector<TensorJob> jobs =
      plan_tensors(input, QuantizePlan::for_file(options.target, input));
  std::vector<GptqTensor> tensors;
  const int64_t head_layer = output_head_layer(jobs);
  for (size_t i : gptq_job_order(jobs)) tensors.push_back(gptq_tensor_of(jobs[i], head_layer));
  return tensors;
}

HessianLookup lookup_in(const HessianSet& hessians) {
  return [&hessians](const GptqTensor& tensor) { return hessians.find(tensor.name); };
}

QuantizeReport quantize_model(const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  check_paths(options);
  if (options.hessians && !options.imatrix.empty()) {
    refuse("quantize: GPTQ and an importance matrix do not combine; use one of them");
  }
  if (options.rescales && !options.imatrix.empty()) {
    refuse(
        "quantize: rescaling does not combine with an importance matrix (gathered from the "
        "unscaled model)");
  }
  const gguf::GgufFile input = gguf::GgufFile::open(options.input);
  const QuantizePlan plan = QuantizePlan::for_file(options.target, input);
  std::vector<TensorJob> jobs = plan_tensors(input, plan);
  QuantizeReport report;
  std::optional<ImportanceMatrix> importance;
  if (!options.imatrix.empty()) {
    importance = read_importance_matrix(options.imatrix);
    report.n_imatrix_entries = importance->entries.size();
    attach_importance(jobs, *importance, options);
  }
  if (options.rescales) attach_rescales(jobs, *options.rescales);
  std::vector<size_t> gptq_order;
  if (options.hessians) {
    gptq_order = gptq_job_order(jobs);
    if (gptq_order.empty()) {
      refuse(
          "GPTQ: no tensor of the repeating layers or the output head is converted to a type "
          "with a GPTQ quantizer (Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K) under " +
          std::string(plan.target().name));
    }
  }

  gguf::GgufWriter writer;
  writer.copy_metadata(input);
  writer.set_u32("general.file_type", plan.target().llama_file_type);
  writer.set_u32("general.quantization_version", kQuantizationVersion);
  record_importance(writer, importance ? &*importance : nullptr, options.imatrix);
  check_free_space(options, planned_file_size(writer, jobs));

  report.input_bytes = input.file_size();
  report.n_tensors = jobs.size();
  ThreadPool pool(options.n_threads);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()));
  size_t n_told = 0;
  const auto tell = [&](const TensorJob& job, bool uses_gptq) {
    if (!options.on_tensor) return;
    const gguf::TensorInfo& t = *job.input;
    options.on_tensor(TensorProgress{n_told++, jobs.size(), t.name, t.type, job.type,
                                     job.importance != nullptr, uses_gptq, job.rescale != nullptr});
  };

  // GPTQ first, in the lookup's order; its outputs wait for their place in the file.
  std::vector<std::optional<std::vector<uint8_t>>> by_gptq(jobs.size());
  const int64_t head_layer = output_head_layer(jobs);
  for (size_t i : gptq_order) {
    const TensorJob& job = jobs[i];
    const gguf::TensorInfo& t = *job.input;
    const HessianSet::Entry* hessian = options.hessians(gptq_tensor_of(job, head_layer));
    if (!hessian) continue;
    if (static_cast<uint64_t>(hessian->n_columns) != t.ne[0]) {
      refuse("GPTQ: the Hessian of '" + t.name + "' has " + std::to_string(hessian->n_columns) +
             " columns, but the tensor has " + std::to_string(t.ne[0]) + " (ne[0])");
    }
    tell(job, true);
    by_gptq[i] =
        convert_tensor_gptq(job, *hessian, input.tensor_data(t), pool, options.gptq_dampening);
    ++report.n_converted;
    ++report.n_gptq;
  }
  if (options.hessians && report.n_gptq == 0) {
    refuse("GPTQ: none of the " + std::to_string(gptq_order.size()) +
           " tensors it may quantize has a Hessian");
  }

  for (size_t i = 0; i < jobs.size(); ++i) {
    const TensorJob& job = jobs[i];
    const gguf::TensorInfo& t = *job.input;
    const std::span<const uint64_t> ne(t.ne.data(), t.n_dims);
    if (by_gptq[i]) {
      writer.add_tensor(t.name, job.type, ne, std::move(*by_gptq[i]));
      continue;
    }
    tell(job, false);
    const std::span<const uint8_t> data = input.tensor_data(t);
    if (job.is_copy()) {
      // The mapping outlives the writer, so a view costs no memory.
      writer.add_tensor_view(t.name, job.type, ne, data);
      ++report.n_copied;
    } else {
      writer.add_tensor(t.name, job.type, ne, convert_tensor(job, data, pool, scratch));
      ++report.n_converted;
      if (job.importance) ++report.n_imatrix;
    }
  }
  pool.rest();

  report.output_bytes = writer.file_size();
  // Again with the exact size: the disk may have filled while the tensors were converted.
  check_free_space(options, report.output_bytes);
  writer.write(options.output);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace llms::quantize
