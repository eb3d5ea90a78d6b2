#include "model/transformer_weights.h"

#include <string>

#include "util/error.h"

namespace llms::model {

namespace {

class TensorFinder {
 public:
  explicit TensorFinder(const gguf::GgufFile& file) : file_(file) {}

  const gguf::TensorInfo* find(const std::string& name) const { return file_.find_tensor(name); }

  const gguf::TensorInfo& require(const std::string& name) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) throw_invalid_file("model file lacks tensor '" + name + "'");
    return *t;
  }

  // A weight matrix of n_rows outputs by n_cols inputs (GGUF ne = [n_cols, n_rows]).
  kernels::QuantMatrix matrix(const std::string& name, uint64_t n_cols, uint64_t n_rows) const {
    const gguf::TensorInfo& t = require(name);
    check_shape(t, {n_cols, n_rows});
    if (!kernels::matmul_supports(t.type)) {
      throw Error(Error::Kind::kUnsupported, "tensor '" + name + "' has type " +
                                                 std::string(gguf::ggml_type_name(t.type)) +
                                                 ", which the matmul kernels do not support");
    }
    auto data = file_.tensor_data(t);
    return kernels::QuantMatrix{t.type, data.data(), static_cast<int64_t>(n_rows),
                                static_cast<int64_t>(n_cols), data.size() / n_rows};
  }

  const float* vector(const std::string& name, uint64_t n) const {
    return vector_of(require(name), n);
  }

  const float* optional_vector(const std::string& name, uint64_t n) const {
    const gguf::TensorInfo* t = find(name);
    return t ? vector_of(*t, n) : nullptr;
  }

 private:
  const float* vector_of(const gguf::TensorInfo& t, uint64_t n) const {
    check_shape(t, {n});
    if (t.type != gguf::GgmlType::kF32) {
      throw Error(Error::Kind::kUnsupported, "tensor '" + t.name + "' has type " +
                                                 std::string(gguf::ggml_type_name(t.type)) +
                                                 "; norms and biases must be F32");
    }
    return reinterpret_cast<const float*>(file_.tensor_data(t).data());
  }

  static void check_shape(const gguf::TensorInfo& t, std::initializer_list<uint64_t> want) {
    bool ok = t.n_dims == want.size();
    size_t d = 0;
    for (uint64_t w : want) ok = ok && t.ne[d++] == w;
    if (!ok) {
      std::string got, expected;
      for (uint32_t i = 0; i < t.n_dims; ++i) got += (i ? " x " : "") + std::to_string(t.ne[i]);
      d = 0;
      for (uint64_t w : want) expected += (d++ ? " x " : "") + std::to_string(w);
      throw_invalid_file("tensor '" + t.name + "' has shape " + got + " but the hyper-parameters need " +
                         expected);
    }
  }

  const gguf::GgufFile& file_;
};

}  // namespace

TransformerWeights TransformerWeights::load(const gguf::GgufFile& file, const ModelConfig& c,
                                            const ArchitectureTraits& traits) {
  TensorFinder f(file);
  if (c.n_vocab == 0) throw_invalid_file("model file declares no vocabulary");
  TransformerWeights w;
  w.token_embd = f.matrix("token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = f.vector("output_norm.weight", c.n_embd);
  w.output = f.find("output.weight") ? f.matrix("output.weight", c.n_embd, c.n_vocab) : w.token_embd;
  (void)traits.ties_output_by_default;  // a missing output.weight always means tied

  for (uint64_t i = 0; i < c.n_layers; ++i) {
    std::string p = "blk." + std::to_string(i) + ".";
    uint64_t q_width = c.n_heads * c.head_dim_k;
    uint64_t k_width = c.n_kv_heads[i] * c.head_dim_k;
    uint64_t v_width = c.n_kv_heads[i] * c.head_dim_v;
    uint64_t o_width = c.n_heads * c.head_dim_v;
    LayerWeights l;
    l.attn_norm = f.vector(p + "attn_norm.weight", c.n_embd);
    l.wq = f.matrix(p + "attn_q.weight", c.n_embd, q_width);
    l.wk = f.matrix(p + "attn_k.weight", c.n_embd, k_width);
    l.wv = f.matrix(p + "attn_v.weight", c.n_embd, v_width);
    l.wo = f.matrix(p + "attn_output.weight", o_width, c.n_embd);
    if (traits.has_qkv_bias) {
      l.bq = f.vector(p + "attn_q.bias", q_width);
      l.bk = f.vector(p + "attn_k.bias", k_width);
      l.bv = f.vector(p + "attn_v.bias", v_width);
    }
    if (traits.has_qk_norm) {
      l.q_norm = f.vector(p + "attn_q_norm.weight", c.head_dim_k);
      l.k_norm = f.vector(p + "attn_k_norm.weight", c.head_dim_k);
    }
    if (traits.has_post_norms) {
      l.post_attn_norm = f.vector(p + "post_attention_norm.weight", c.n_embd);
      l.post_ffn_norm = f.vector(p + "post_ffw_norm.weight", c.n_embd);
    }
    l.ffn_norm = f.vector(p + "ffn_norm.weight", c.n_embd);
    if (c.n_ff == 0) throw_invalid_file("model file lacks a feed_forward_length");
    l.w_gate = f.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.w_up = f.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);
    l.w_down = f.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);
    w.layers.push_back(l);
  }
  return w;
}

}  // namespace llms::model
