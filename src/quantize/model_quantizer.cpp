// quantize/model_quantizer: see model_quantizer.h for the contract. Every refusal happens before
// the first tensor is converted, so a bad invocation costs nothing but its message.
#include "quantize/model_quantizer.h"

#include <chrono>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"
#include "util/checked_math.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace llms::quantize {

namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;

// The block layouts written are those of llama.cpp's GGML_QNT_VERSION 2.
constexpr uint32_t kQuantizationVersion = 2;

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
  bool is_copy() const { return type == input->type; }
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

// Dequantizes and re-quantizes one tensor row by row; rows are spread over the pool, each thread
// with its own f32 row in `scratch`.
std::vector<uint8_t> convert_tensor(const TensorJob& job, std::span<const uint8_t> input,
                                    ThreadPool& pool, std::vector<std::vector<float>>& scratch) {
  const gguf::TensorInfo& t = *job.input;
  const auto row_length = static_cast<int64_t>(t.ne[0]);
  const uint64_t in_row_bytes = quant::quantized_row_bytes(t.type, row_length);
  const uint64_t out_row_bytes = quant::quantized_row_bytes(job.type, row_length);
  std::vector<uint8_t> output(job.n_bytes);
  for (auto& row : scratch) row.resize(static_cast<size_t>(row_length));
  pool.parallel_for(static_cast<int64_t>(job.n_rows), [&](int64_t begin, int64_t end, int thread) {
    float* row = scratch[static_cast<size_t>(thread)].data();
    for (int64_t r = begin; r < end; ++r) {
      const auto index = static_cast<uint64_t>(r);
      quant::dequantize_row(t.type, input.data() + index * in_row_bytes, row, row_length);
      quant::quantize_row(job.type, row, output.data() + index * out_row_bytes, row_length);
    }
  });
  return output;
}

}  // namespace

QuantizeReport quantize_model(const QuantizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  check_paths(options);
  const gguf::GgufFile input = gguf::GgufFile::open(options.input);
  const QuantizePlan plan = QuantizePlan::for_file(options.target, input);
  const std::vector<TensorJob> jobs = plan_tensors(input, plan);

  gguf::GgufWriter writer;
  writer.copy_metadata(input);
  writer.set_u32("general.file_type", plan.target().llama_file_type);
  writer.set_u32("general.quantization_version", kQuantizationVersion);
  check_free_space(options, planned_file_size(writer, jobs));

  QuantizeReport report;
  report.input_bytes = input.file_size();
  report.n_tensors = jobs.size();
  ThreadPool pool(options.n_threads);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()));
  for (size_t i = 0; i < jobs.size(); ++i) {
    const TensorJob& job = jobs[i];
    const gguf::TensorInfo& t = *job.input;
    if (options.on_tensor) {
      options.on_tensor(TensorProgress{i, jobs.size(), t.name, t.type, job.type});
    }
    const std::span<const uint64_t> ne(t.ne.data(), t.n_dims);
    const std::span<const uint8_t> data = input.tensor_data(t);
    if (job.is_copy()) {
      // The mapping outlives the writer, so a view costs no memory.
      writer.add_tensor_view(t.name, job.type, ne, data);
      ++report.n_copied;
    } else {
      writer.add_tensor(t.name, job.type, ne, convert_tensor(job, data, pool, scratch));
      ++report.n_converted;
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
