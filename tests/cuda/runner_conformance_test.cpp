// The CUDA runner end to end against the CPU runner on tiny models of each family: the same
// batches to both, every logits row compared, and captured step graphs against eager steps.
// Needs an NVIDIA GPU: without one every test skips and says why (cuda::probe()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_runner.h"
#include "cuda_test_support.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kv/kv_cache_manager.h"
#include "kv/step_batch.h"
#include "model/cpu_runner.h"
#include "model/tiny_model.h"
#include "quant/quant.h"

namespace llms::cuda {
namespace {

using namespace testing_support;

// The model with every tensor stored as F32: the values the GPU decodes from the quantized
// blocks (quant::dequantize_row), multiplied on the CPU without its 8-bit activations.
std::vector<uint8_t> with_f32_weights(const gguf::GgufFile& file) {
  gguf::GgufWriter out;
  out.copy_metadata(file);
  for (const gguf::TensorInfo& t : file.tensors()) {
    const auto row = static_cast<int64_t>(t.ne[0]);
    const size_t row_bytes = *gguf::ggml_row_bytes(t.type, t.ne[0]);
    const std::span<const uint8_t> data = file.tensor_data(t);
    std::vector<float> values(t.n_elements);
    for (int64_t r = 0; r * row < static_cast<int64_t>(t.n_elements); ++r) {
      quant::dequantize_row(t.type, data.data() + static_cast<size_t>(r) * row_bytes,
                            values.data() + r * row, row);
    }
    std::vector<uint8_t> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    out.add_tensor(t.name, GgmlType::kF32, std::span(t.ne.data(), t.n_dims), std::move(bytes));
  }
  return out.to_bytes();
}

// End to end: the CUDA runner against the CPU runner on tiny models of each family: the same
// batches to both, every logits row compared. The CPU runs the model's weights stored as F32
// (with_f32_weights), so both multiply the same weight values with f32 activations: on
// quantized weights the CPU's own kernels multiply 8-bit activations, whose error (a few 1e-3 of
// the logits with the K-quants' 256-value blocks) would hide the GPU's. Logits are compared
// within a normalized error `tolerance` (1e-3 leaves room for bf16 GEMM products in steps of
// more than 8 tokens), and the argmax too unless the CPU's top two are within 5 % of the row's
// RMS (a tie either rounding may break).
class TwinRunners {
 public:
  // use_graphs: small steps replay captured graphs (some tests run eagerly, so a graph bug and
  // a kernel bug show apart).
  TwinRunners(const model::TinyModelSpec& spec, const DeviceInfo& device, bool use_graphs,
              int64_t slice_elements)
      : bytes_(model::build_tiny_model(spec).to_bytes()),
        file_(gguf::GgufFile::from_bytes(bytes_)),
        cpu_bytes_(with_f32_weights(file_)),
        cpu_file_(gguf::GgufFile::from_bytes(cpu_bytes_)),
        cpu_(cpu_file_, std::make_shared<ThreadPool>(2)),
        gpu_(file_, device, RunnerOptions{device.index, 0.5, use_graphs}, slice_elements),
        layout_(cpu_.config().windowed_kv_layout()) {
    cpu_.allocate_kv(kBlock, kBlocks, kv::KvCacheType::kF16, layout_);
    gpu_.allocate_kv(kBlock, kBlocks, kv::KvCacheType::kF16, layout_);
  }
  static constexpr int32_t kBlock = 16;
  static constexpr int32_t kBlocks = 64;

  const kv::KvGroupLayout& layout() const { return layout_; }
  model::CpuRunner& cpu() { return cpu_; }
  CudaRunner& gpu() { return gpu_; }

  // Runs `batch` on both; returns the CPU's argmax of each row.
  std::vector<int32_t> step(const kv::StepBatch& batch, double tolerance, const std::string& what) {
    const model::LogitsView a = cpu_.execute(batch);
    std::vector<std::vector<float>> want;
    for (int32_t r = 0; r < a.n_rows; ++r) want.emplace_back(a.row(r).begin(), a.row(r).end());
    const model::LogitsView b = gpu_.execute(batch);
    EXPECT_EQ(b.n_rows, a.n_rows) << what;
    EXPECT_EQ(b.n_vocab, a.n_vocab) << what;
    std::vector<int32_t> tops;
    for (int32_t r = 0; r < std::min(a.n_rows, b.n_rows); ++r) {
      const std::vector<float> got(b.row(r).begin(), b.row(r).end());
      const std::vector<float>& w = want[static_cast<size_t>(r)];
      EXPECT_LT(nmse(got, w), tolerance) << what << " row " << r;
      double rms = 0.0;
      for (float v : w) rms += static_cast<double>(v) * v;
      rms = std::sqrt(rms / static_cast<double>(w.size()));
      std::vector<float> sorted = w;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      const auto cpu_top = static_cast<int32_t>(std::max_element(w.begin(), w.end()) - w.begin());
      const auto gpu_top =
          static_cast<int32_t>(std::max_element(got.begin(), got.end()) - got.begin());
      if (sorted[0] - sorted[1] > 0.05 * rms) {
        EXPECT_EQ(gpu_top, cpu_top) << what << " row " << r;
      }
      tops.push_back(cpu_top);
    }
    return tops;
  }

 private:
  std::vector<uint8_t> bytes_;
  gguf::GgufFile file_;
  std::vector<uint8_t> cpu_bytes_;
  gguf::GgufFile cpu_file_;
  model::CpuRunner cpu_;
  CudaRunner gpu_;
  kv::KvGroupLayout layout_;
};

// A sequence's block table: pages first_page, first_page + 1, ... interleaved per cache group,
// with a windowed group's blocks wholly before position `lowest_query`'s window given back.
std::vector<kv::BlockId> table_for(const kv::KvGroupLayout& layout, int32_t first_page,
                                   int32_t n_context, int32_t lowest_query) {
  const int32_t groups = layout.n_groups();
  const int32_t blocks = (n_context + TwinRunners::kBlock - 1) / TwinRunners::kBlock;
  std::vector<kv::BlockId> table;
  for (int32_t b = 0; b < blocks; ++b) {
    for (int32_t g = 0; g < groups; ++g) {
      const int64_t window = layout.window(g);
      const bool before_window =
          window > 0 && (b + 1) * TwinRunners::kBlock <= lowest_query - window + 1;
      table.push_back(before_window ? kv::kNoBlock : first_page + b * groups + g);
    }
  }
  return table;
}

// A 2-layer Q4_K model, 256 wide (whole K-quant blocks), for the tests of the runner alone.
std::vector<uint8_t> small_q4_k_model(const std::string& architecture) {
  model::TinyModelSpec s;
  s.architecture = architecture;
  s.weight_type = GgmlType::kQ4_K;
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_layers = 2;
  return model::build_tiny_model(s).to_bytes();
}

struct EndToEndCase {
  std::string architecture;
  GgmlType type;
  uint32_t n_embd;
  uint32_t n_layers;
};

class CudaEndToEnd : public CudaConformance, public ::testing::WithParamInterface<EndToEndCase> {
 protected:
  model::TinyModelSpec spec() const {
    const EndToEndCase& p = GetParam();
    model::TinyModelSpec s;
    s.architecture = p.architecture;
    s.weight_type = p.type;
    s.n_embd = p.n_embd;
    s.n_ff = 2 * p.n_embd;
    s.n_heads = 4;
    s.n_kv_heads = 2;
    s.n_layers = p.n_layers;
    s.sliding_window = p.architecture == "gemma3" ? 16 : 0;
    return s;
  }
};

// A 72-token prompt in one step (past the tiled GEMM: the cuBLAS path, its slices small enough
// that every layer matrix takes several), then 24 greedy steps fed the CPU's tokens; Gemma 3's
// windowed layers get their early blocks given back as decoding passes them.
TEST_P(CudaEndToEnd, GreedyStepsMatchTheCpuRunner) {
  TwinRunners twins(spec(), device_, /*use_graphs=*/true, /*slice_elements=*/4096);
  std::mt19937 rng(3);
  std::vector<int32_t> step_tokens;
  for (int i = 0; i < 72; ++i) step_tokens.push_back(static_cast<int32_t>(rng() % 200) + 10);
  int32_t cached = 0;
  for (int step = 0; step < 25; ++step) {
    kv::StepBatch batch;
    batch.n_kv_groups = twins.layout().n_groups();
    const int32_t n_ctx = cached + static_cast<int32_t>(step_tokens.size());
    const auto table = table_for(twins.layout(), 0, n_ctx, cached);
    batch.add_sequence(0, step_tokens, cached, table, 1);
    const auto tops = twins.step(batch, 1e-3, "step " + std::to_string(step));
    ASSERT_EQ(tops.size(), 1u);
    cached = n_ctx;
    step_tokens = {tops[0]};
  }
  EXPECT_GT(twins.gpu().graph_launches(), 0) << "the decode steps did not replay a graph";
}

// Two sequences in one step: one prefilling in chunks with its last three rows asked for, one
// decoding (steps of 11 to 21 tokens: the tiled GEMM); then the decoding one forks its last
// block (copy-on-write) and goes on from the copy. A step of more than 8 logits rows takes the
// output matrix 8 rows at a time.
TEST_P(CudaEndToEnd, MixedBatchesAndBlockCopiesMatchTheCpuRunner) {
  TwinRunners twins(spec(), device_, /*use_graphs=*/false, CudaRunner::kDefaultWeightSliceElements);
  const kv::KvGroupLayout& layout = twins.layout();
  std::mt19937 rng(5);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(rng() % 200) + 10);
    return t;
  };
  const int32_t b_first_page = 32;  // sequence B's pages; A's start at 0
  // B: a 20-token prompt alone first.
  int32_t b_cached = 0;
  {
    kv::StepBatch batch;
    batch.n_kv_groups = layout.n_groups();
    const auto table = table_for(layout, b_first_page, 20, 0);
    batch.add_sequence(1, random_tokens(20), 0, table, 1);
    twins.step(batch, 1e-3, "B prompt");
    b_cached = 20;
  }
  int32_t a_cached = 0;
  for (int step = 0; step < 4; ++step) {
    kv::StepBatch batch;
    batch.n_kv_groups = layout.n_groups();
    const int32_t a_chunk = step < 3 ? 12 : 1;
    const auto a_table = table_for(layout, 0, a_cached + a_chunk, a_cached);
    const auto b_table = table_for(layout, b_first_page, b_cached + 1, b_cached);
    batch.add_sequence(0, random_tokens(a_chunk), a_cached, a_table, std::min(a_chunk, 3));
    batch.add_sequence(1, random_tokens(1), b_cached, b_table, 1);
    twins.step(batch, 1e-3, "mixed step " + std::to_string(step));
    a_cached += a_chunk;
    ++b_cached;
  }
  // B forks: its last block's pages are copied to fresh ones and B goes on there.
  const int32_t groups = layout.n_groups();
  const int32_t last_block = (b_cached - 1) / TwinRunners::kBlock;
  std::vector<kv::BlockCopy> copies;
  const int32_t fork_page = 56;
  for (int32_t g = 0; g < groups; ++g) {
    copies.push_back({b_first_page + last_block * groups + g, fork_page + g});
  }
  twins.cpu().copy_blocks(copies);
  twins.gpu().copy_blocks(copies);
  auto b_table = table_for(layout, b_first_page, b_cached + 1, b_cached);
  for (int32_t g = 0; g < groups; ++g) {
    b_table[static_cast<size_t>(last_block * groups + g)] = fork_page + g;
  }
  // Ten rows of A (more than one GEMV call of 8) beside B's decode on the forked block.
  kv::StepBatch batch;
  batch.n_kv_groups = groups;
  const auto a_table = table_for(layout, 0, a_cached + 10, a_cached);
  batch.add_sequence(0, random_tokens(10), a_cached, a_table, 10);
  batch.add_sequence(1, random_tokens(1), b_cached, b_table, 1);
  EXPECT_EQ(twins.step(batch, 1e-3, "after the fork").size(), 11u);
}

// F32 weights and steps of at most 8 tokens: no bf16 anywhere and f32 activations on both
// sides, so the runners agree a thousand times more tightly than the bf16 bound above (f16 KV
// rounding of nearly equal keys is what is left).
TEST_F(CudaConformance, F32ModelInSmallStepsMatchesTheCpuTightly) {
  model::TinyModelSpec s;
  s.architecture = "qwen2";
  s.n_layers = 3;
  TwinRunners twins(s, device_, /*use_graphs=*/true, CudaRunner::kDefaultWeightSliceElements);
  std::mt19937 rng(7);
  int32_t cached = 0;
  for (int step = 0; step < 8; ++step) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 8; ++i) tokens.push_back(static_cast<int32_t>(rng() % 200) + 10);
    kv::StepBatch batch;
    const auto table = table_for(twins.layout(), 0, cached + 8, cached);
    batch.add_sequence(0, tokens, cached, table, 8);
    twins.step(batch, 1e-6, "step " + std::to_string(step));
    cached += 8;
  }
}

// Captured step graphs replay exactly the kernels an eager step launches: the same logits bit
// for bit, step after step (each decode step of a shape replays the graph its first one made,
// with new tokens, positions and a block table that grows a block every 16 tokens), with
// two sequences in a step (another shape, another graph), and decode steps of 12 sequences.
TEST_F(CudaConformance, StepGraphsGiveTheEagerStepsBitForBit) {
  const auto bytes = small_q4_k_model("llama");
  const gguf::GgufFile file = gguf::GgufFile::from_bytes(bytes);
  CudaRunner graphs(file, device_, RunnerOptions{device_.index, 0.5, /*use_graphs=*/true});
  CudaRunner eager(file, device_, RunnerOptions{device_.index, 0.5, /*use_graphs=*/false});
  const kv::KvGroupLayout layout = graphs.config().windowed_kv_layout();
  for (CudaRunner* r : {&graphs, &eager}) r->allocate_kv(16, 192, kv::KvCacheType::kF16, layout);
  std::mt19937 rng(11);
  std::vector<int32_t> cached(12, 0);
  auto run_both = [&](const kv::StepBatch& batch, const std::string& what) {
    const model::LogitsView a = graphs.execute(batch);
    const std::vector<float> got(a.data, a.data + static_cast<size_t>(a.n_rows) * a.n_vocab);
    const model::LogitsView b = eager.execute(batch);
    const std::vector<float> want(b.data, b.data + static_cast<size_t>(b.n_rows) * b.n_vocab);
    ASSERT_EQ(got, want) << what;
  };
  // One step of sequences first .. last - 1, sequence q with n_new(q) random tokens.
  auto run_step = [&](int first, int last, const std::function<int32_t(int)>& n_new,
                      const std::string& what) {
    kv::StepBatch batch;
    batch.n_kv_groups = layout.n_groups();
    // The batch views its sequences' tokens and tables: they live until the step has run.
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(last));
    std::vector<std::vector<kv::BlockId>> tables(static_cast<size_t>(last));
    for (int q = first; q < last; ++q) {
      auto& t = tokens[static_cast<size_t>(q)];
      for (int i = 0; i < n_new(q); ++i) t.push_back(static_cast<int32_t>(rng() % 200) + 10);
      auto& table = tables[static_cast<size_t>(q)];
      const auto n = static_cast<int32_t>(t.size());
      table = table_for(layout, 16 * q, cached[q] + n, cached[q]);
      batch.add_sequence(q, t, cached[q], table, 1);
      cached[q] += n;
    }
    run_both(batch, what);
  };
  for (int step = 0; step < 40; ++step) {
    // Prompts of 12 tokens (sequence 0 at step 0, 1 at step 20), then decode.
    ASSERT_NO_FATAL_FAILURE(run_step(
        0, step < 20 ? 1 : 2, [&](int q) { return step == 0 || (step == 20 && q == 1) ? 12 : 1; },
        "step " + std::to_string(step)));
  }
  // Every step of up to 8 tokens but the first of each shape replayed a graph.
  EXPECT_GE(graphs.graph_launches(), 30);
  // Ten more sequences' 3-token prompts in one step (30 tokens: eager), then decode steps of all
  // 12 (past 8 tokens, the tiled GEMM): each one a graph's launch (the first captures it).
  const int64_t before = graphs.graph_launches();
  ASSERT_NO_FATAL_FAILURE(run_step(
      2, 12, [](int) { return 3; }, "10 prompts"));
  for (int step = 0; step < 5; ++step) {
    ASSERT_NO_FATAL_FAILURE(run_step(
        0, 12, [](int) { return 1; }, "12 sequences, step " + std::to_string(step)));
  }
  EXPECT_EQ(graphs.graph_launches() - before, 5) << "decode steps of 12 sequences";
  EXPECT_EQ(eager.graph_launches(), 0);
}

// Batch invariance (RunnerOptions::batch_invariant): sequence A's 40-token prompt in chunks of
// 3 and 37 tokens, then 3 greedy steps, alone, then again beside sequence B's 30-token prompt
// (in A's first step) and decode steps: every logits row of A the same bits. Without the
// option A's first 3 tokens take the GEMV alone and a bf16 GEMM in a step of 33, and A's rows
// differ (so the comparison can fail).
TEST_F(CudaConformance, BatchInvariantRunnerGivesASequenceTheSameBitsInAnyStep) {
  const auto bytes = small_q4_k_model("qwen2");
  const gguf::GgufFile file = gguf::GgufFile::from_bytes(bytes);
  std::mt19937 rng(13);
  std::vector<int32_t> prompt_a;
  std::vector<int32_t> prompt_b;
  for (int i = 0; i < 40; ++i) prompt_a.push_back(static_cast<int32_t>(rng() % 200) + 10);
  for (int i = 0; i < 30; ++i) prompt_b.push_back(static_cast<int32_t>(rng() % 200) + 10);
  // A's rows: its prompt's last, then one per greedy step (each fed the argmax).
  auto run = [&](bool invariant, bool with_b) {
    CudaRunner r(file, device_, RunnerOptions{device_.index, 0.5, true, invariant});
    const kv::KvGroupLayout layout = r.config().windowed_kv_layout();
    r.allocate_kv(16, 32, kv::KvCacheType::kF16, layout);
    std::vector<std::vector<float>> rows;
    int32_t a_cached = 0;
    int32_t b_cached = 0;
    std::vector<int32_t> a_next;
    std::vector<int32_t> b_next = {17};
    const std::vector<std::vector<int32_t>> a_chunks = {{prompt_a.begin(), prompt_a.begin() + 3},
                                                        {prompt_a.begin() + 3, prompt_a.end()}};
    for (size_t step = 0; step < a_chunks.size() + 3; ++step) {
      kv::StepBatch batch;
      batch.n_kv_groups = layout.n_groups();
      const std::vector<int32_t>& a_tokens = step < a_chunks.size() ? a_chunks[step] : a_next;
      const auto a_n = static_cast<int32_t>(a_tokens.size());
      const auto a_table = table_for(layout, 0, a_cached + a_n, a_cached);
      batch.add_sequence(0, a_tokens, a_cached, a_table, 1);
      std::vector<kv::BlockId> b_table;
      const std::vector<int32_t>& b_tokens = step == 0 ? prompt_b : b_next;
      if (with_b) {
        const auto b_n = static_cast<int32_t>(b_tokens.size());
        b_table = table_for(layout, 16, b_cached + b_n, b_cached);
        batch.add_sequence(1, b_tokens, b_cached, b_table, 1);
        b_cached += b_n;
      }
      const model::LogitsView v = r.execute(batch);
      a_cached += a_n;
      if (step + 1 < a_chunks.size()) continue;  // a chunk without A's logits row
      rows.emplace_back(v.row(0).begin(), v.row(0).end());
      const std::vector<float>& last = rows.back();
      a_next = {static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin())};
    }
    return rows;
  };
  const auto alone = run(true, false);
  const auto shared = run(true, true);
  ASSERT_EQ(alone.size(), 4u);
  ASSERT_EQ(shared.size(), 4u);
  for (size_t i = 0; i < alone.size(); ++i) EXPECT_EQ(shared[i], alone[i]) << "row " << i;
  EXPECT_NE(run(false, true)[0], run(false, false)[0])
      << "without batch invariance the 33-token step's GEMM gave the GEMV's bits";
}

INSTANTIATE_TEST_SUITE_P(Families, CudaEndToEnd,
                         ::testing::Values(EndToEndCase{"qwen2", GgmlType::kF32, 64, 3},
                                           EndToEndCase{"llama", GgmlType::kQ8_0, 128, 3},
                                           EndToEndCase{"qwen3", GgmlType::kQ4_K, 256, 3},
                                           EndToEndCase{"gemma3", GgmlType::kF16, 128, 7},
                                           EndToEndCase{"qwen2", GgmlType::kQ6_K, 256, 2},
                                           EndToEndCase{"llama", GgmlType::kQ4_0, 128, 2},
                                           EndToEndCase{"qwen2", GgmlType::kQ5_K, 256, 2},
                                           EndToEndCase{"llama", GgmlType::kBF16, 64, 2}),
                         [](const ::testing::TestParamInfo<EndToEndCase>& param_info) {
                           const EndToEndCase& c = param_info.param;
                           return c.architecture + "_" + std::string(gguf::ggml_type_name(c.type));
                         });

}  // namespace
}  // namespace llms::cuda
