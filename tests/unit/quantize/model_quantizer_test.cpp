// quantize_model on tiny models: every tensor gets its planned type and keeps its shape and order,
// values come back within each type's error bound, metadata survives with general.file_type set,
// and every refusal leaves the directory as it was (no output, no temporary file).
#include "quantize/model_quantizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/tiny_model.h"
#include "quant/quant.h"
#include "quantize/quantize_plan.h"
#include "quantize_fixtures.h"
#include "temp_dir.h"
#include "util/error.h"

namespace llms::quantize {
namespace {

using fixtures::k_friendly_spec;
using fixtures::options_for;
using fixtures::values_of;

namespace fs = std::filesystem;
using gguf::GgmlType;
using ::testing::HasSubstr;

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.insert(entry.path().filename().string());
  }
  return names;
}

std::vector<uint8_t> bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Largest error of a block relative to the block's largest magnitude, over a type's own blocks
// (32 or 256 values; 32 for float types, whose error is relative to each value and so would be
// large for values near zero).
double max_block_error(const std::vector<float>& original, const std::vector<float>& restored,
                       GgmlType type) {
  const size_t block = std::max<size_t>(gguf::ggml_type_info(type).block_size, 32);
  double worst = 0;
  for (size_t start = 0; start < original.size(); start += block) {
    double max_abs = 0, max_error = 0;
    for (size_t i = start; i < std::min(start + block, original.size()); ++i) {
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(original[i])));
      max_error = std::max(max_error, std::fabs(static_cast<double>(original[i]) - restored[i]));
    }
    if (max_abs > 0) worst = std::max(worst, max_error / max_abs);
  }
  return worst;
}

// Relative to a block's largest magnitude. Q8_0, Q6_K: half a step plus the scale's rounding.
// Q5_0 and Q4_0 scale by the signed extreme (-16 or -8 steps), so a value of the other sign near
// it saturates a whole step short: 1/16 and 1/8. Q5_K and Q4_K fit a scale and a minimum per 32
// values (6-bit codes) to the least squares error, so a single value may be off by a bit more
// than half their 31 and 15 steps over the sub-block's range.
double error_bound(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return 0;
    case GgmlType::kF16:
      return 1e-3;
    case GgmlType::kQ8_0:
      return 0.006;
    case GgmlType::kQ6_K:
      return 0.03;
    case GgmlType::kQ5_0:
      return 0.07;
    case GgmlType::kQ5_K:
      return 0.08;
    case GgmlType::kQ4_0:
      return 0.135;
    case GgmlType::kQ4_K:
      return 0.16;
    default:
      return 0;
  }
}

// Quantizes `input` to `target` and checks the output against the input tensor by tensor.
void expect_faithful(const fs::path& input_path, const fs::path& output_path,
                     QuantizeTarget target) {
  const gguf::GgufFile input = gguf::GgufFile::open(input_path);
  const gguf::GgufFile output = gguf::GgufFile::open(output_path);
  const QuantizePlan plan = QuantizePlan::for_file(target, input);
  ASSERT_EQ(output.tensors().size(), input.tensors().size());
  for (size_t i = 0; i < input.tensors().size(); ++i) {
    const gguf::TensorInfo& in = input.tensors()[i];
    const gguf::TensorInfo& out = output.tensors()[i];
    SCOPED_TRACE(in.name);
    EXPECT_EQ(out.name, in.name);
    EXPECT_EQ(out.type, plan.type_for(in));
    EXPECT_EQ(out.n_dims, in.n_dims);
    EXPECT_EQ(out.ne, in.ne);
    const double error = max_block_error(values_of(input, in), values_of(output, out), out.type);
    EXPECT_LE(error, error_bound(out.type)) << gguf::ggml_type_name(out.type);
  }
  // Every key survives (general.alignment is the writer's own), and the two set ones are set.
  for (const gguf::KeyValue& kv : input.metadata()) {
    if (kv.key == "general.file_type" || kv.key == "general.alignment") continue;
    const gguf::Value* copied = output.find(kv.key);
    ASSERT_NE(copied, nullptr) << kv.key;
    EXPECT_EQ(copied->type(), kv.value.type()) << kv.key;
    EXPECT_EQ(copied->to_display_string(16), kv.value.to_display_string(16)) << kv.key;
  }
  EXPECT_EQ(output.get_uint("general.file_type"), target_info(target).llama_file_type);
  const gguf::Value* version = output.find("general.quantization_version");
  ASSERT_NE(version, nullptr);
  EXPECT_EQ(version->type(), gguf::ValueType::kUint32);
  EXPECT_EQ(version->as_uint(), 2u);
}

std::map<GgmlType, int> type_counts(const fs::path& path) {
  std::map<GgmlType, int> counts;
  // Named: a range-for over a temporary's member would outlive the temporary.
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  for (const auto& t : file.tensors()) ++counts[t.type];
  return counts;
}

TEST(ModelQuantizer, F32ToEachTargetIsFaithful) {
  testing::TempDir dir;
  const fs::path in = dir.path() / "f32.gguf";
  model::write_tiny_model(k_friendly_spec(), in);
  for (QuantizeTarget target :
       {QuantizeTarget::kQ8_0, QuantizeTarget::kQ4_K, QuantizeTarget::kQ4_K_M,
        QuantizeTarget::kQ5_K_M, QuantizeTarget::kQ6_K, QuantizeTarget::kQ4_0,
        QuantizeTarget::kF16}) {
    SCOPED_TRACE(target_info(target).name);
    const fs::path out = dir.path() / (std::string(target_info(target).name) + ".gguf");
    size_t n_told = 0;
    QuantizeOptions o = options_for(in, out, target);
    o.on_tensor = [&](const TensorProgress& p) {
      EXPECT_EQ(p.index, n_told);
      ++n_told;
    };
    const QuantizeReport report = quantize_model(o);
    EXPECT_EQ(report.n_tensors, n_told);
    EXPECT_EQ(report.n_converted + report.n_copied, report.n_tensors);
    EXPECT_EQ(report.output_bytes, fs::file_size(out));
    EXPECT_EQ(report.input_bytes, fs::file_size(in));
    expect_faithful(in, out, target);
  }
}

TEST(ModelQuantizer, Q4KMMixesQ4KWithQ6K) {
  testing::TempDir dir;
  const fs::path in = dir.path() / "f32.gguf";
  model::write_tiny_model(k_friendly_spec(), in);
  const fs::path out = dir.path() / "q4_k_m.gguf";
  quantize_model(options_for(in, out, QuantizeTarget::kQ4_K_M));
  const gguf::GgufFile file = gguf::GgufFile::open(out);
  // 4 layers: use_more_bits picks layers 2 and 3; output is Q6_K, token_embd Q4_K.
  EXPECT_EQ(file.find_tensor("output.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(file.find_tensor("token_embd.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(file.find_tensor("blk.0.attn_v.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(file.find_tensor("blk.2.attn_v.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(file.find_tensor("blk.3.ffn_down.weight")->type, GgmlType::kQ6_K);
  EXPECT_EQ(file.find_tensor("blk.3.ffn_up.weight")->type, GgmlType::kQ4_K);
  EXPECT_EQ(file.find_tensor("blk.1.attn_norm.weight")->type, GgmlType::kF32);
}

TEST(ModelQuantizer, TiedEmbeddingsGetQ6K) {
  testing::TempDir dir;
  model::TinyModelSpec spec = k_friendly_spec();
  spec.tie_embeddings = true;
  const fs::path in = dir.path() / "tied.gguf";
  model::write_tiny_model(spec, in);
  const fs::path out = dir.path() / "q4_k_m.gguf";
  quantize_model(options_for(in, out, QuantizeTarget::kQ4_K_M));
  const gguf::GgufFile file = gguf::GgufFile::open(out);
  EXPECT_EQ(file.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("token_embd.weight")->type, GgmlType::kQ6_K);
}

TEST(ModelQuantizer, NarrowRowsFallBack) {
  testing::TempDir dir;
  // The default tiny model is 64 wide: no K block fits, Q4_K falls back to Q5_0 throughout.
  const fs::path in = dir.path() / "narrow.gguf";
  model::write_tiny_model(model::TinyModelSpec{}, in);
  const fs::path out = dir.path() / "q4_k.gguf";
  quantize_model(options_for(in, out, QuantizeTarget::kQ4_K));
  expect_faithful(in, out, QuantizeTarget::kQ4_K);
  const auto counts = type_counts(out);
  EXPECT_EQ(counts.count(GgmlType::kQ4_K), 0u);
  EXPECT_GT(counts.at(GgmlType::kQ5_0), 0);

  // A 40-wide matrix is not even whole 32-element blocks: F16.
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 1);
  const uint64_t ne[] = {40, 3};
  std::vector<float> values(40 * 3);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i));
  const auto* bytes = reinterpret_cast<const uint8_t*>(values.data());
  w.add_tensor("blk.0.attn_q.weight", GgmlType::kF32, ne,
               std::span<const uint8_t>(bytes, values.size() * sizeof(float)));
  const fs::path odd = dir.path() / "odd.gguf";
  w.write(odd);
  const fs::path odd_out = dir.path() / "odd_q4_k_m.gguf";
  quantize_model(options_for(odd, odd_out, QuantizeTarget::kQ4_K_M));
  EXPECT_EQ(gguf::GgufFile::open(odd_out).tensors()[0].type, GgmlType::kF16);
  expect_faithful(odd, odd_out, QuantizeTarget::kQ4_K_M);
}

TEST(ModelQuantizer, ATensorAlreadyInItsTypeIsCopiedExactly) {
  testing::TempDir dir;
  model::TinyModelSpec spec = k_friendly_spec();
  spec.weight_type = GgmlType::kQ8_0;
  const fs::path in = dir.path() / "q8.gguf";
  model::write_tiny_model(spec, in);
  const fs::path out = dir.path() / "q8_again.gguf";
  const QuantizeReport report = quantize_model(options_for(in, out, QuantizeTarget::kQ8_0));
  EXPECT_EQ(report.n_converted, 0u);
  const gguf::GgufFile a = gguf::GgufFile::open(in);
  const gguf::GgufFile b = gguf::GgufFile::open(out);
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const auto x = a.tensor_data(a.tensors()[i]);
    const auto y = b.tensor_data(b.tensors()[i]);
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << a.tensors()[i].name;
  }
}

TEST(ModelQuantizer, QuantizedInputRequantizes) {
  // Q8_0 -> F16 (a reference from a quantized file) -> Q4_K_M, like the manual check on a real
  // model; each step within its own bound of the step before.
  testing::TempDir dir;
  model::TinyModelSpec spec = k_friendly_spec();
  spec.weight_type = GgmlType::kQ8_0;
  const fs::path q8 = dir.path() / "q8.gguf";
  model::write_tiny_model(spec, q8);
  const fs::path f16 = dir.path() / "f16.gguf";
  quantize_model(options_for(q8, f16, QuantizeTarget::kF16));
  expect_faithful(q8, f16, QuantizeTarget::kF16);
  const fs::path q4 = dir.path() / "q4_k_m.gguf";
  quantize_model(options_for(f16, q4, QuantizeTarget::kQ4_K_M));
  expect_faithful(f16, q4, QuantizeTarget::kQ4_K_M);
}

TEST(ModelQuantizer, ThreadCountDoesNotChangeTheBytes) {
  testing::TempDir dir;
  const fs::path in = dir.path() / "f32.gguf";
  model::write_tiny_model(k_friendly_spec(), in);
  std::vector<uint8_t> first;
  for (int threads : {1, 3}) {
    const fs::path out = dir.path() / ("t" + std::to_string(threads) + ".gguf");
    QuantizeOptions o = options_for(in, out, QuantizeTarget::kQ4_K_M);
    o.n_threads = threads;
    quantize_model(o);
    if (first.empty()) {
      first = bytes_of(out);
    } else {
      EXPECT_EQ(bytes_of(out), first);
    }
  }
}

// Runs a quantization that must be refused and checks the directory is left as it was.
Error expect_refused(const QuantizeOptions& o, const fs::path& dir) {
  const std::set<std::string> before = names_in(dir);
  try {
    quantize_model(o);
  } catch (const Error& e) {
    EXPECT_EQ(names_in(dir), before) << "a refusal left or removed a file";
    return e;
  }
  ADD_FAILURE() << "not refused";
  return Error(Error::Kind::kInternal, "not refused");
}

TEST(ModelQuantizer, AnExistingOutputNeedsForce) {
  testing::TempDir dir;
  const fs::path in = dir.path() / "f32.gguf";
  model::write_tiny_model(model::TinyModelSpec{}, in);
  const fs::path out = dir.write("exists.gguf", std::string_view("keep me"));
  const Error e = expect_refused(options_for(in, out, QuantizeTarget::kQ8_0), dir.path());
  EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("already exists"));
  EXPECT_THAT(e.what(), HasSubstr("--force"));
  EXPECT_EQ(bytes_of(out).size(), 7u);

  QuantizeOptions forced = options_for(in, out, QuantizeTarget::kQ8_0);
  forced.overwrite = true;
  quantize_model(forced);
  expect_faithful(in, out, QuantizeTarget::kQ8_0);
}

TEST(ModelQuantizer, RefusesToWriteOverItsInput) {
  testing::TempDir dir;
  const fs::path in = dir.path() / "f32.gguf";
  model::write_tiny_model(model::TinyModelSpec{}, in);
  const std::vector<uint8_t> original = bytes_of(in);
  for (const fs::path& out : {in, dir.path() / "." / "f32.gguf"}) {
    QuantizeOptions o = options_for(in, out, QuantizeTarget::kQ8_0);
    o.overwrite = true;
    const Error e = expect_refused(o, dir.path());
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("is the input file"));
  }
  EXPECT_EQ(bytes_of(in), original);
}

TEST(ModelQuantizer, RefusesAMissingOutputDirectory) {
  testing::TempDir dir;
  const fs::path in = dir.path() / "f32.gguf";
  model::write_tiny_model(model::TinyModelSpec{}, in);
  const Error e = expect_refused(
      options_for(in, dir.path() / "missing" / "q.gguf", QuantizeTarget::kQ8_0), dir.path());
  EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("missing' does not exist"));
}

TEST(ModelQuantizer, RefusesATensorTypeItCannotRead) {
  testing::TempDir dir;
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  const uint64_t ne[] = {32, 2};
  const std::vector<uint8_t> zeros(32 * 2 * 4, 0);
  w.add_tensor("blk.0.attn_q.weight", GgmlType::kF32, ne, zeros);
  w.add_tensor("blk.0.positions", GgmlType::kI32, ne, zeros);
  const fs::path in = dir.path() / "i32.gguf";
  w.write(in);
  const Error e =
      expect_refused(options_for(in, dir.path() / "q.gguf", QuantizeTarget::kQ8_0), dir.path());
  EXPECT_EQ(e.kind(), Error::Kind::kUnsupported);
  EXPECT_THAT(e.what(), HasSubstr("tensor 'blk.0.positions' is stored as I32"));
}

TEST(ModelQuantizer, RefusesWhenTheDiskIsShortWithBothNumbers) {
  testing::TempDir dir;
  const fs::path in = dir.path() / "f32.gguf";
  model::write_tiny_model(model::TinyModelSpec{}, in);
  QuantizeOptions o = options_for(in, dir.path() / "q.gguf", QuantizeTarget::kQ8_0);
  o.free_space = [](const fs::path&) -> uint64_t { return 1000; };
  const Error e = expect_refused(o, dir.path());
  EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("not enough free space"));
  EXPECT_THAT(e.what(), HasSubstr("1000 are available"));
  EXPECT_THAT(e.what(), ::testing::ContainsRegex("needs [0-9]+ bytes"));

  // The space checked before converting is an upper bound of the exact size checked before
  // writing: exact fits, exact - 1 is refused after the conversion, still leaving nothing.
  QuantizeOptions probe = options_for(in, dir.path() / "probe.gguf", QuantizeTarget::kQ8_0);
  const uint64_t exact = quantize_model(probe).output_bytes;
  fs::remove(dir.path() / "probe.gguf");
  int n_asked = 0;
  o.free_space = [&](const fs::path&) -> uint64_t {
    return ++n_asked == 1 ? std::numeric_limits<uint64_t>::max() : exact - 1;
  };
  const Error late = expect_refused(o, dir.path());
  EXPECT_EQ(n_asked, 2);
  EXPECT_THAT(late.what(), HasSubstr("needs " + std::to_string(exact) + " bytes"));
}

TEST(ModelQuantizer, RefusesZeroThreads) {
  testing::TempDir dir;
  const fs::path in = dir.path() / "f32.gguf";
  model::write_tiny_model(model::TinyModelSpec{}, in);
  QuantizeOptions o = options_for(in, dir.path() / "q.gguf", QuantizeTarget::kQ8_0);
  o.n_threads = 0;
  EXPECT_EQ(expect_refused(o, dir.path()).kind(), Error::Kind::kInvalidArgument);
}

TEST(ModelQuantizer, AFailedWriteLeavesNoTemporaryFile) {
  testing::TempDir dir;
  const fs::path in = dir.path() / "f32.gguf";
  model::write_tiny_model(model::TinyModelSpec{}, in);
  // A read-only directory: the writer cannot create its temporary file (root ignores the mode,
  // so the check is only meaningful for ordinary users).
  const fs::path locked = dir.path() / "locked";
  fs::create_directory(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
  QuantizeOptions o = options_for(in, locked / "q.gguf", QuantizeTarget::kQ8_0);
  try {
    quantize_model(o);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kIo);
  }
  fs::permissions(locked, fs::perms::owner_all);
  if (fs::exists(locked / "q.gguf")) {
    EXPECT_EQ(names_in(locked), std::set<std::string>{"q.gguf"});  // running as root
  } else {
    EXPECT_TRUE(names_in(locked).empty());
  }
}

}  // namespace
}  // namespace llms::quantize
