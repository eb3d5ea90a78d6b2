// libFuzzer target for what a model file's metadata and tensor table decide beyond the GGUF
// reader (gguf_fuzz): the hyper-parameters (model/model_config.h), the KV-cache shape and sizes
// derived from them (kv/kv_budget.h) and the weight look-up with its shape checks
// (model/transformer_weights.h). A hostile file must be refused with llms::Error, never crash,
// divide by zero, overflow or ask for an absurd allocation.
//
// Checks, beyond "no sanitizer finding", on a file that is accepted:
//   - the configuration is internally consistent: at least one layer and head, per-layer lists of
//     n_layers entries, each layer's KV heads dividing the query heads, non-zero head widths;
//   - every weight matrix the loader returns lies inside the file's bytes (so decode cannot read
//     past the mapping) and has the configuration's width.
// Seeds: fuzz/corpus/model_config_fuzz/, tiny models from `llmserve tiny-model` (one per
// architecture, small widths).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "gguf/gguf_file.h"
#include "model/architecture.h"
#include "model/model_config.h"
#include "model/transformer_weights.h"
#include "util/error.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// The matrix's bytes lie within [begin, end).
void check_inside(const llms::kernels::QuantMatrix& m, const uint8_t* begin, const uint8_t* end) {
  if (m.n_rows == 0) return;
  const auto* p = static_cast<const uint8_t*>(m.data);
  check(p >= begin && p <= end);
  check(static_cast<uint64_t>(m.n_rows) <= static_cast<uint64_t>(end - p) / m.row_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto file = llms::gguf::GgufFile::from_bytes(std::span<const uint8_t>(data, size));
    const auto config = llms::model::ModelConfig::from_gguf(file);
    check(config.n_layers > 0 && config.n_heads > 0 && config.n_embd > 0);
    check(config.head_dim_k > 0 && config.head_dim_v > 0);
    check(config.n_kv_heads.size() == config.n_layers);
    check(config.is_sliding.size() == config.n_layers);
    for (uint64_t kv_heads : config.n_kv_heads) {
      check(kv_heads > 0 && config.n_heads % kv_heads == 0);
    }
    (void)config.kv_shape();
    check(config.max_kv_heads() <= config.n_heads);

    const auto& traits = llms::model::architecture_traits(config.architecture);
    const auto weights = llms::model::TransformerWeights::load(file, config, traits);
    // The file's bytes (from_bytes keeps a copy): found from any tensor's span.
    check(!file.tensors().empty());
    const llms::gguf::TensorInfo& any = file.tensors().front();
    const uint8_t* begin = file.tensor_data(any).data() - file.data_offset() - any.offset;
    const uint8_t* end = begin + file.file_size();
    check(static_cast<uint64_t>(weights.token_embd.n_cols) == config.n_embd);
    check_inside(weights.token_embd, begin, end);
    check_inside(weights.output, begin, end);
    check(weights.layers.size() == config.n_layers);
    for (const llms::model::LayerWeights& layer : weights.layers) {
      for (const auto* m : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up,
                            &layer.w_down}) {
        check_inside(*m, begin, end);
      }
      check(static_cast<uint64_t>(layer.wq.n_cols) == config.n_embd);
      check(static_cast<uint64_t>(layer.w_down.n_rows) == config.n_embd);
    }
  } catch (const llms::Error&) {
    // Refused with a reason: what a hostile file must get.
  }
  return 0;
}
