// quantize/model_quantizer: rewrites a GGUF model file with its tensors in other types.
//
// Contract:
//   - Every tensor, in the input's order and with its shape, gets the type QuantizePlan gives it.
//     A tensor whose input type already is that type is copied byte for byte (re-quantizing a
//     Q8_0 row to Q8_0 would only add error); any other is dequantized to f32 one row at a time
//     (quant::dequantize_row) and quantized again (quant::quantize_row), rows spread over
//     `n_threads` threads. Round-to-nearest, except with an importance matrix (below).
//   - With `imatrix` (a file of quantize/importance_matrix.h), a converted tensor whose name has
//     an entry and whose planned type has a weighted quantizer (quantize/weighted_quantizers.h)
//     is quantized by it, from the entry's mean squared activations (sum_squares / n_tokens);
//     the others (no entry, e.g. output.weight or token_embd.weight; F16/F32 targets) stay
//     round-to-nearest. The output records quantize.imatrix.file, quantize.imatrix.dataset (the
//     first calibration file), quantize.imatrix.entries_count and quantize.imatrix.chunks_count,
//     llama-quantize's keys; without an imatrix those keys, if the input had them, are dropped.
//   - With `hessians` (a HessianLookup), the tensors GPTQ may quantize (gptq_tensors(): converted
//     "blk.N." matrices and the output head "output.weight", as layer N + 1 after the last, whose
//     planned type has a GPTQ quantizer, quantize/gptq.h) are asked for
//     their Hessian one by one in layer order before the other tensors are converted; a tensor
//     given an entry is quantized by GPTQ from its whole f32 matrix, the others as above. An entry
//     whose width is not its tensor's ne[0] is refused, and so are a target under which no tensor
//     can be GPTQ-quantized (before the lookup is asked anything) and a lookup that gives no
//     tensor an entry. Not together with `imatrix` (kInvalidArgument).
//   - With `rescales` (quantize/smoothing.h, quantize/awq.h), a tensor that has one is rescaled
//     (each row after it is dequantized) before it is quantized, and is converted even when its
//     type stays the same (a norm: F32 -> F32). With `hessians` too, a rescaled GPTQ tensor's
//     Hessian (gathered from the unscaled model) becomes diag(1/column) H diag(1/column), since
//     its input was divided by the column factors. Not together with `imatrix`
//     (kInvalidArgument); a rescale whose lengths do not fit its tensor is refused.
//   - Metadata: every key of the input (GgufWriter::copy_metadata, so not general.alignment: the
//     output uses GGUF's default of 32), then general.file_type set to the target's LLAMA_FTYPE and
//     general.quantization_version to 2 (the block layouts of llama.cpp since 2023).
//   - Memory: one f32 row per thread, never a whole tensor (let alone the model) in f32, except
//     for GPTQ, which holds the tensor it quantizes in f32 (and its Hessian's factor). The
//     converted tensors are held in memory until the file is written (the GGUF header, which comes
//     first, needs every tensor's size, and a single write keeps the file whole or absent); copied
//     tensors are views into the input's mapping. So the peak is about the output's size.
//   - Bad input loses nothing. Before any conversion, each of these is refused with an llms::Error
//     naming what is wrong, and no file is created: n_threads < 1, the output's directory missing,
//     the output the same file as the input (even with overwrite), the output existing without
//     `overwrite` (kInvalidArgument; the message names --force, the CLI flag that sets it), an
//     input file that does not open (the reader's errors), a tensor whose type cannot be
//     dequantized (kUnsupported, naming the tensor and its type), an imatrix file that does not
//     read (its reader's errors), an imatrix entry whose column count differs from its tensor's
//     ne[0] (kInvalidArgument naming both), an imatrix that no converted tensor can use (none of
//     its entries names a tensor of the model, so another model's; or none of the tensors it names
//     is converted to a type with a weighted quantizer; kInvalidArgument), and too little free
//     space in the output's directory for the planned size (kInvalidArgument, with both numbers;
//     checked again with the exact size just before writing). The file is written under a
//     temporary name beside the output and renamed into place only when complete;
//     GgufWriter::write removes the temporary file on any failure, so the output path holds
//     either its old content or the whole new file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "quantize/hessian.h"
#include "quantize/quantize_plan.h"
#include "quantize/smoothing.h"

namespace llms::quantize {

// Told before each tensor is converted (or copied): in the input's order, except that with a
// HessianLookup the tensors it is asked about come first, in layer order.
struct TensorProgress {
  size_t index = 0;  // how many were told before this one
  size_t n_tensors = 0;
  std::string_view name;
  gguf::GgmlType from = gguf::GgmlType::kF32;
  gguf::GgmlType to = gguf::GgmlType::kF32;
  bool uses_imatrix = false;  // quantized with the importance matrix's weights
  bool uses_gptq = false;     // quantized by GPTQ with its Hessian
  bool rescaled = false;      // values rescaled first (smoothing)
};

// Gives GPTQ a tensor's Hessian, or nullptr (the tensor then stays round-to-nearest).
// quantize_model asks once for each tensor of gptq_tensors(), in that order (by layer), and is done
// with an entry before it asks about the next tensor: so a lookup may gather Hessians a group of
// layers at a time and drop a group once asked about a later layer.
using HessianLookup = std::function<const HessianSet::Entry*(const GptqTensor& tensor)>;

struct QuantizeOptions {
  std::filesystem::path input;
  std::filesystem::path output;
  QuantizeTarget target = QuantizeTarget::kQ4_K_M;
  bool overwrite = false;  // replace an existing output (the CLI's --force)
  int n_threads = 1;
  std::filesystem::path imatrix;             // empty: none (the CLI's --imatrix)
  HessianLookup hessians;                    // empty: no GPTQ
  const TensorRescales* rescales = nullptr;  // smoothing (quantize/smoothing.h) when set
  double gptq_dampening = 0.01;
  std::function<void(const TensorProgress&)> on_tensor;  // optional
  // Free bytes in a directory; empty: std::filesystem::space(dir).available. Tests replace it to
  // check the refusal without filling a disk.
  std::function<uint64_t(const std::filesystem::path& dir)> free_space;
};

struct QuantizeReport {
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
  size_t n_tensors = 0;
  size_t n_converted = 0;        // dequantized and quantized again
  size_t n_copied = 0;           // already in their planned type
  size_t n_imatrix = 0;          // of the converted, those quantized with the importance matrix
  size_t n_imatrix_entries = 0;  // entries in the importance matrix file
  size_t n_gptq = 0;             // of the converted, those quantized by GPTQ
  double seconds = 0;
};

QuantizeReport quantize_model(const QuantizeOptions& options);

// The tensors GPTQ may quantize under options.target, ordered by layer (stable within a layer).
// Opens options.input.
std::vector<GptqTensor> gptq_tensors(const QuantizeOptions& options);

// A lookup into one set of Hessians gathered beforehand.
HessianLookup lookup_in(const HessianSet& hessians);
HessianLookup lookup_in(HessianSet&&) = delete;  // the lookup keeps a reference

// The refusals quantize_model makes before it reads a weight (see above: paths and threads, a
// tensor it cannot read, too little free space for the planned size), for callers that do long
// work (a calibration run) before calling it. Ignores imatrix, hessians and rescales.
void check_quantize_inputs(const QuantizeOptions& options);

}  // namespace llms::quantize
