// libFuzzer target for the GGUF reader: any input either is refused with llms::Error or yields a
// GgufFile every part of which can be read without a sanitizer finding.
//
// After a successful parse it walks all metadata (every typed accessor, whole-array conversions,
// display strings, every array element, iteratively so the harness itself cannot overflow the
// stack), calls the typed look-ups that may throw, and reads every byte of every tensor span.
// Seeds: fuzz/corpus/gguf_fuzz/, written by tests/unit/gguf/gguf_fuzz_seeds_test.cpp.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace {

using llms::gguf::GgufFile;
using llms::gguf::Value;
using llms::gguf::ValueType;

// Touching results through a volatile keeps the optimizer from skipping the reads.
volatile uint64_t g_sink = 0;

void touch_scalars(const Value& v) {
  uint64_t h = static_cast<uint64_t>(v.type());
  if (auto x = v.as_uint()) h += *x;
  if (auto x = v.as_int()) h += static_cast<uint64_t>(*x);
  if (auto x = v.as_float()) h += static_cast<uint64_t>(*x == *x);
  if (auto x = v.as_bool()) h += *x;
  if (auto x = v.as_string()) {
    for (char c : *x) h += static_cast<unsigned char>(c);
  }
  g_sink = g_sink + h;
}

void walk(const Value& root) {
  g_sink = g_sink + root.to_display_string().size() + root.to_display_string(2).size();
  std::vector<Value> stack = {root};
  while (!stack.empty()) {
    Value v = std::move(stack.back());
    stack.pop_back();
    touch_scalars(v);
    if (v.type() != ValueType::kArray) continue;
    if (auto s = v.to_strings()) g_sink = g_sink + s->size();
    if (auto f = v.to_floats()) g_sink = g_sink + f->size();
    if (auto i = v.to_ints()) g_sink = g_sink + i->size();
    for (uint64_t i = 0; i < v.size(); ++i) stack.push_back(v.element(i));
  }
}

template <typename Fn>
void maybe_throws(Fn&& fn) {
  try {
    fn();
  } catch (const llms::Error&) {
  }
}

void lookups(const GgufFile& file, std::string_view key) {
  maybe_throws([&] { g_sink = g_sink + file.get_uint(key).has_value(); });
  maybe_throws([&] { g_sink = g_sink + file.get_int(key).has_value(); });
  maybe_throws([&] { g_sink = g_sink + file.get_float(key).has_value(); });
  maybe_throws([&] { g_sink = g_sink + file.get_bool(key).has_value(); });
  maybe_throws([&] { g_sink = g_sink + file.get_string(key).has_value(); });
  maybe_throws([&] { g_sink = g_sink + file.get_strings(key).has_value(); });
  maybe_throws([&] { g_sink = g_sink + file.get_floats(key).has_value(); });
  maybe_throws([&] { g_sink = g_sink + file.get_ints(key).has_value(); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  try {
    GgufFile file = GgufFile::from_bytes(bytes);
    g_sink = g_sink + file.version() + file.alignment() + file.data_offset() + file.file_size();
    for (const auto& kv : file.metadata()) {
      walk(kv.value);
      lookups(file, kv.key);
      g_sink = g_sink + (file.find(kv.key) != nullptr);
    }
    lookups(file, "general.architecture");
    for (const auto& t : file.tensors()) {
      std::span<const uint8_t> span = file.tensor_data(t);
      uint64_t sum = 0;
      for (uint8_t b : span) sum += b;
      g_sink = g_sink + sum + t.n_bytes + t.n_elements + (file.find_tensor(t.name) == &t);
    }
  } catch (const llms::Error&) {
    // Refusing a bad file is the expected outcome for most inputs.
  }
  return 0;
}
