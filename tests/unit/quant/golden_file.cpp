// Reader of the quant golden file; every size is checked against the bytes left.
#include "golden_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace llms::quant::testing {

namespace {

class Cursor {
 public:
  explicit Cursor(std::vector<uint8_t> data) : data_(std::move(data)) {}

  bool read(void* out, size_t n) {
    if (n > data_.size() - pos_) return false;
    if (n > 0) std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool u32(uint32_t* out) { return read(out, sizeof *out); }
  bool at_end() const { return pos_ == data_.size(); }

 private:
  std::vector<uint8_t> data_;
  size_t pos_ = 0;
};

bool read_record(Cursor& in, GoldenRecord* record) {
  uint32_t type, flags, n_elements, n_bytes, label_len;
  if (!in.u32(&type) || !in.u32(&flags) || !in.u32(&n_elements) || !in.u32(&n_bytes) ||
      !in.u32(&label_len) || label_len > 4096 || n_elements > (1u << 24) || n_bytes > (1u << 26)) {
    return false;
  }
  if (!gguf::ggml_type_info(type)) return false;
  record->type = static_cast<gguf::GgmlType>(type);
  record->n_elements = n_elements;
  record->label.resize(label_len);
  record->bytes.resize(n_bytes);
  record->has_source = (flags & 1u) != 0;
  if (!in.read(record->label.data(), label_len) || !in.read(record->bytes.data(), n_bytes)) {
    return false;
  }
  if (record->has_source) {
    record->source.resize(n_elements);
    if (!in.read(record->source.data(), n_elements * sizeof(float))) return false;
  }
  record->expected.resize(n_elements);
  return in.read(record->expected.data(), n_elements * sizeof(float));
}

}  // namespace

GoldenFile read_golden_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    ADD_FAILURE() << "cannot open " << path << " (run tools/make_quant_golden.py)";
    return {};
  }
  Cursor in(std::vector<uint8_t>(std::istreambuf_iterator<char>(file), {}));
  char magic[8];
  uint32_t version, n_records, gen_len;
  if (!in.read(magic, 8) || std::memcmp(magic, "LLMSQGLD", 8) != 0 || !in.u32(&version) ||
      version != 1 || !in.u32(&n_records) || !in.u32(&gen_len) || gen_len > 4096) {
    ADD_FAILURE() << path << ": bad header";
    return {};
  }
  GoldenFile golden;
  golden.generator.resize(gen_len);
  if (!in.read(golden.generator.data(), gen_len)) {
    ADD_FAILURE() << path << ": truncated header";
    return {};
  }
  for (uint32_t i = 0; i < n_records; ++i) {
    GoldenRecord record;
    if (!read_record(in, &record)) {
      ADD_FAILURE() << path << ": record " << i << " is malformed or truncated";
      return {};
    }
    golden.records.push_back(std::move(record));
  }
  if (!in.at_end()) {
    ADD_FAILURE() << path << ": trailing bytes after " << n_records << " records";
    return {};
  }
  return golden;
}

}  // namespace llms::quant::testing
