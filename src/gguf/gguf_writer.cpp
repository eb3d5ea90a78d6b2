// gguf/gguf_writer: see gguf_writer.h for the contract. All sizes are computed before anything is
// emitted, so to_bytes() allocates once and write() streams through a small buffer.
#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "util/checked_math.h"
#include "util/error.h"

namespace llms::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF writer copies scalars as little-endian bytes");

namespace {

constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};

[[noreturn]] void throw_argument(std::string message) {
  throw Error(Error::Kind::kInvalidArgument, "GGUF writer: " + std::move(message));
}

template <typename T>
void append_scalar(std::vector<uint8_t>& out, T v) {
  uint8_t bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

void append_string(std::vector<uint8_t>& out, std::string_view s) {
  append_scalar<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void append_array_header(std::vector<uint8_t>& out, ValueType element_type, uint64_t count) {
  append_scalar<uint32_t>(out, static_cast<uint32_t>(element_type));
  append_scalar<uint64_t>(out, count);
}

bool is_known_value_type(ValueType type) {
  return static_cast<uint32_t>(type) <= static_cast<uint32_t>(ValueType::kFloat64);
}

std::string type_label(ValueType type) {
  if (!is_known_value_type(type)) return "type " + std::to_string(static_cast<uint32_t>(type));
  return std::string(value_type_name(type));
}

// Appends the encoding of a value read from a file (the part after its u32 value type).
// Recursion depth is the nesting depth of arrays, which the reader has already bounded.
void append_copy(std::vector<uint8_t>& out, const Value& value) {
  auto need = [&](auto optional) {
    if (!optional) throw_argument("cannot copy a value of type " + type_label(value.type()));
    return *optional;
  };
  switch (value.type()) {
    case ValueType::kUint8:
      append_scalar(out, static_cast<uint8_t>(need(value.as_uint())));
      return;
    case ValueType::kUint16:
      append_scalar(out, static_cast<uint16_t>(need(value.as_uint())));
      return;
    case ValueType::kUint32:
      append_scalar(out, static_cast<uint32_t>(need(value.as_uint())));
      return;
    case ValueType::kUint64:
      append_scalar(out, need(value.as_uint()));
      return;
    case ValueType::kInt8:
      append_scalar(out, static_cast<int8_t>(need(value.as_int())));
      return;
    case ValueType::kInt16:
      append_scalar(out, static_cast<int16_t>(need(value.as_int())));
      return;
    case ValueType::kInt32:
      append_scalar(out, static_cast<int32_t>(need(value.as_int())));
      return;
    case ValueType::kInt64:
      append_scalar(out, need(value.as_int()));
      return;
    case ValueType::kFloat32:
      append_scalar(out, static_cast<float>(need(value.as_float())));
      return;
    case ValueType::kFloat64:
      append_scalar(out, need(value.as_float()));
      return;
    case ValueType::kBool:
      append_scalar<uint8_t>(out, need(value.as_bool()) ? 1 : 0);
      return;
    case ValueType::kString:
      append_string(out, need(value.as_string()));
      return;
    case ValueType::kArray:
      append_array_header(out, value.element_type(), value.size());
      for (uint64_t i = 0; i < value.size(); ++i) append_copy(out, value.element(i));
      return;
  }
  throw_argument("cannot copy a value of " + type_label(value.type()));
}

}  // namespace

// ---- WriteValue ----------------------------------------------------------------------------

WriteValue WriteValue::u8(uint8_t v) {
  std::vector<uint8_t> e;
  append_scalar(e, v);
  return {ValueType::kUint8, std::move(e)};
}
WriteValue WriteValue::i8(int8_t v) {
  std::vector<uint8_t> e;
  append_scalar(e, v);
  return {ValueType::kInt8, std::move(e)};
}
WriteValue WriteValue::u16(uint16_t v) {
  std::vector<uint8_t> e;
  append_scalar(e, v);
  return {ValueType::kUint16, std::move(e)};
}
WriteValue WriteValue::i16(int16_t v) {
  std::vector<uint8_t> e;
  append_scalar(e, v);
  return {ValueType::kInt16, std::move(e)};
}
WriteValue WriteValue::u32(uint32_t v) {
  std::vector<uint8_t> e;
  append_scalar(e, v);
  return {ValueType::kUint32, std::move(e)};
}
WriteValue WriteValue::i32(int32_t v) {
  std::vector<uint8_t> e;
  append_scalar(e, v);
  return {ValueType::kInt32, std::move(e)};
}
WriteValue WriteValue::f32(float v) {
  std::vector<uint8_t> e;
  append_scalar(e, v);
  return {ValueType::kFloat32, std::move(e)};
}
WriteValue WriteValue::boolean(bool v) {
  std::vector<uint8_t> e;
  append_scalar<uint8_t>(e, v ? 1 : 0);
  return {ValueType::kBool, std::move(e)};
}
WriteValue WriteValue::string(std::string_view v) {
  std::vector<uint8_t> e;
  append_string(e, v);
  return {ValueType::kString, std::move(e)};
}
WriteValue WriteValue::u64(uint64_t v) {
  std::vector<uint8_t> e;
  append_scalar(e, v);
  return {ValueType::kUint64, std::move(e)};
}
WriteValue WriteValue::i64(int64_t v) {
  std::vector<uint8_t> e;
  append_scalar(e, v);
  return {ValueType::kInt64, std::move(e)};
}
WriteValue WriteValue::f64(double v) {
  std::vector<uint8_t> e;
  append_scalar(e, v);
  return {ValueType::kFloat64, std::move(e)};
}

template <typename T>
WriteValue WriteValue::scalar_array(ValueType element_type, std::span<const T> v) {
  std::vector<uint8_t> e;
  e.reserve(12 + v.size() * sizeof(T));
  append_array_header(e, element_type, v.size());
  for (const T& x : v) append_scalar(e, x);
  WriteValue value(ValueType::kArray, std::move(e));
  value.element_type_ = element_type;
  value.count_ = v.size();
  return value;
}

WriteValue WriteValue::u8s(std::span<const uint8_t> v) {
  return scalar_array(ValueType::kUint8, v);
}
WriteValue WriteValue::i8s(std::span<const int8_t> v) { return scalar_array(ValueType::kInt8, v); }
WriteValue WriteValue::u16s(std::span<const uint16_t> v) {
  return scalar_array(ValueType::kUint16, v);
}
WriteValue WriteValue::i16s(std::span<const int16_t> v) {
  return scalar_array(ValueType::kInt16, v);
}
WriteValue WriteValue::u32s(std::span<const uint32_t> v) {
  return scalar_array(ValueType::kUint32, v);
}
WriteValue WriteValue::i32s(std::span<const int32_t> v) {
  return scalar_array(ValueType::kInt32, v);
}
WriteValue WriteValue::f32s(std::span<const float> v) {
  return scalar_array(ValueType::kFloat32, v);
}
WriteValue WriteValue::u64s(std::span<const uint64_t> v) {
  return scalar_array(ValueType::kUint64, v);
}
WriteValue WriteValue::i64s(std::span<const int64_t> v) {
  return scalar_array(ValueType::kInt64, v);
}
WriteValue WriteValue::f64s(std::span<const double> v) {
  return scalar_array(ValueType::kFloat64, v);
}

WriteValue WriteValue::bools(std::span<const bool> v) {
  // bool's object representation is not guaranteed to be one byte of 0/1: encode explicitly.
  std::vector<uint8_t> e;
  e.reserve(12 + v.size());
  append_array_header(e, ValueType::kBool, v.size());
  for (bool x : v) e.push_back(x ? 1 : 0);
  WriteValue value(ValueType::kArray, std::move(e));
  value.element_type_ = ValueType::kBool;
  value.count_ = v.size();
  return value;
}

WriteValue WriteValue::strings(std::span<const std::string> v) {
  std::vector<std::string_view> views(v.begin(), v.end());
  return strings(std::span<const std::string_view>(views));
}

WriteValue WriteValue::strings(std::span<const std::string_view> v) {
  size_t total = 12;
  for (const auto& s : v) total += 8 + s.size();
  std::vector<uint8_t> e;
  e.reserve(total);
  append_array_header(e, ValueType::kString, v.size());
  for (const auto& s : v) append_string(e, s);
  WriteValue value(ValueType::kArray, std::move(e));
  value.element_type_ = ValueType::kString;
  value.count_ = v.size();
  return value;
}

WriteValue WriteValue::array(ValueType element_type, std::span<const WriteValue> items) {
  if (!is_known_value_type(element_type)) {
    throw_argument("array element type " + type_label(element_type) + " is not a GGUF type");
  }
  size_t total = 12;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].type() != element_type) {
      throw_argument("array item " + std::to_string(i) + " is a " + type_label(items[i].type()) +
                     " in an array of " + type_label(element_type));
    }
    total += items[i].encoded_.size();
  }
  std::vector<uint8_t> e;
  e.reserve(total);
  append_array_header(e, element_type, items.size());
  for (const auto& item : items) e.insert(e.end(), item.encoded_.begin(), item.encoded_.end());
  WriteValue value(ValueType::kArray, std::move(e));
  value.element_type_ = element_type;
  value.count_ = items.size();
  return value;
}

WriteValue WriteValue::from(const Value& value) {
  std::vector<uint8_t> e;
  append_copy(e, value);
  WriteValue copy(value.type(), std::move(e));
  if (value.type() == ValueType::kArray) {
    copy.element_type_ = value.element_type();
    copy.count_ = value.size();
  }
  return copy;
}

// ---- GgufWriter ----------------------------------------------------------------------------

// Where emitted bytes go: appended to a vector, or written to a file descriptor through a buffer.
class GgufWriter::Sink {
 public:
  explicit Sink(std::vector<uint8_t>* out) : out_(out) {}
  Sink(int fd, std::string path) : fd_(fd), path_(std::move(path)) { buffer_.reserve(kBuffer); }

  void put(const uint8_t* data, size_t n) {
    if (out_ != nullptr) {
      out_->insert(out_->end(), data, data + n);
      return;
    }
    if (buffer_.size() + n > kBuffer) flush();
    if (n >= kBuffer) {
      write_all(data, n);
    } else {
      buffer_.insert(buffer_.end(), data, data + n);
    }
  }
  template <typename T>
  void scalar(T v) {
    uint8_t bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));
    put(bytes, sizeof(T));
  }
  void string(std::string_view s) {
    scalar<uint64_t>(s.size());
    put(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  void zeros(uint64_t n) {
    static constexpr uint8_t kZeros[256] = {};
    while (n > 0) {
      size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sizeof(kZeros)));
      put(kZeros, chunk);
      n -= chunk;
    }
  }
  void flush() {
    if (out_ == nullptr && !buffer_.empty()) {
      write_all(buffer_.data(), buffer_.size());
      buffer_.clear();
    }
  }

 private:
  static constexpr size_t kBuffer = size_t{1} << 20;

  void write_all(const uint8_t* data, size_t n) {
    while (n > 0) {
      ssize_t written = ::write(fd_, data, n);
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) {
        throw Error(Error::Kind::kIo, "cannot write '" + path_ + "': " + std::strerror(errno));
      }
      data += written;
      n -= static_cast<size_t>(written);
    }
  }

  std::vector<uint8_t>* out_ = nullptr;
  int fd_ = -1;
  std::string path_;
  std::vector<uint8_t> buffer_;
};

GgufWriter::GgufWriter(uint32_t version) : version_(version) {
  if (version != 2 && version != 3) {
    throw_argument("version " + std::to_string(version) + " is not supported (2 or 3)");
  }
}

void GgufWriter::set(std::string_view key, WriteValue value) {
  if (key.empty()) throw_argument("a metadata key is empty");
  if (key.size() > kMaxKeyBytes) {
    throw_argument("metadata key '" + std::string(key.substr(0, 64)) + "...' is longer than " +
                   std::to_string(kMaxKeyBytes) + " bytes");
  }
  uint32_t new_alignment = alignment_;
  if (key == kAlignmentKey) {
    if (value.type() != ValueType::kUint32) {
      throw_argument("'general.alignment' must be a u32, not a " + type_label(value.type()));
    }
    uint32_t a;
    std::memcpy(&a, value.encoded().data(), sizeof(a));
    if (!is_power_of_two(a) || a > kMaxAlignment) {
      throw_argument("'general.alignment' " + std::to_string(a) + " is not a power of two in [1, " +
                     std::to_string(kMaxAlignment) + "]");
    }
    new_alignment = a;
  }
  auto it = std::find_if(kvs_.begin(), kvs_.end(), [&](const Kv& kv) { return kv.key == key; });
  if (it != kvs_.end()) {
    it->value = std::move(value);
  } else {
    kvs_.push_back(Kv{std::string(key), std::move(value)});
  }
  alignment_ = new_alignment;
}

void GgufWriter::copy_metadata(const GgufFile& file) {
  for (const auto& kv : file.metadata()) {
    if (kv.key == kAlignmentKey) continue;
    set(kv.key, WriteValue::from(kv.value));
  }
}

bool GgufWriter::erase(std::string_view key) {
  auto it = std::find_if(kvs_.begin(), kvs_.end(), [&](const Kv& kv) { return kv.key == key; });
  if (it == kvs_.end()) return false;
  kvs_.erase(it);
  if (key == kAlignmentKey) alignment_ = kDefaultAlignment;
  return true;
}

bool GgufWriter::has(std::string_view key) const {
  return std::any_of(kvs_.begin(), kvs_.end(), [&](const Kv& kv) { return kv.key == key; });
}

GgufWriter::Tensor& GgufWriter::add_tensor_checked(std::string_view name, GgmlType type,
                                                   std::span<const uint64_t> ne,
                                                   size_t n_data_bytes) {
  if (name.empty()) throw_argument("a tensor name is empty");
  const std::string quoted = "tensor '" + std::string(name) + "'";
  if (name.size() > kMaxTensorNameBytes) {
    throw_argument(quoted + ": the name is longer than " + std::to_string(kMaxTensorNameBytes) +
                   " bytes");
  }
  for (const auto& t : tensors_) {
    if (t.name == name) throw_argument(quoted + " is added twice (duplicate name)");
  }
  auto info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info) {
    throw_argument(quoted + ": unknown ggml type " + std::to_string(static_cast<uint32_t>(type)));
  }
  if (ne.empty() || ne.size() > kMaxDims) {
    throw_argument(quoted + " has " + std::to_string(ne.size()) +
                   " dimensions (n_dims must be 1.." + std::to_string(kMaxDims) + ")");
  }
  uint64_t n_elements = 1;
  for (size_t i = 0; i < ne.size(); ++i) {
    const std::string dim = "ne[" + std::to_string(i) + "] = " + std::to_string(ne[i]);
    if (ne[i] == 0) throw_argument(quoted + " has a zero dimension (" + dim + ")");
    if (ne[i] > static_cast<uint64_t>(INT64_MAX)) {
      throw_argument(quoted + ": dimension " + dim + " does not fit in int64");
    }
    auto product = checked_mul(n_elements, ne[i]);
    if (!product || *product > static_cast<uint64_t>(INT64_MAX)) {
      throw_argument(quoted + ": the element count overflows");
    }
    n_elements = *product;
  }
  if (ne[0] % info->block_size != 0) {
    throw_argument(quoted + ": ne[0] = " + std::to_string(ne[0]) +
                   " is not a multiple of the block size " + std::to_string(info->block_size) +
                   " of " + std::string(info->name));
  }
  auto n_bytes = ggml_row_bytes(type, n_elements);
  if (!n_bytes) throw_argument(quoted + ": the byte size overflows");
  if (*n_bytes != n_data_bytes) {
    throw_argument(quoted + " needs " + std::to_string(*n_bytes) + " bytes of " +
                   std::string(info->name) + " data for its shape, got " +
                   std::to_string(n_data_bytes));
  }
  Tensor& t = tensors_.emplace_back();
  t.name = std::string(name);
  t.type = type;
  t.ne.assign(ne.begin(), ne.end());
  return t;
}

void GgufWriter::add_tensor(std::string_view name, GgmlType type, std::span<const uint64_t> ne,
                            std::span<const uint8_t> data) {
  Tensor& t = add_tensor_checked(name, type, ne, data.size());
  t.owned.assign(data.begin(), data.end());
}

void GgufWriter::add_tensor(std::string_view name, GgmlType type, std::span<const uint64_t> ne,
                            std::vector<uint8_t>&& data) {
  Tensor& t = add_tensor_checked(name, type, ne, data.size());
  t.owned = std::move(data);
}

void GgufWriter::add_tensor_view(std::string_view name, GgmlType type, std::span<const uint64_t> ne,
                                 std::span<const uint8_t> data) {
  Tensor& t = add_tensor_checked(name, type, ne, data.size());
  t.view = data;
  t.is_view = true;
}

uint64_t GgufWriter::header_size() const {
  uint64_t size = 4 + 4 + 8 + 8;  // magic, version, n_tensors, n_kv
  for (const auto& kv : kvs_) size += 8 + kv.key.size() + 4 + kv.value.encoded().size();
  for (const auto& t : tensors_) size += 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
  return size;
}

namespace {

uint64_t align_up(uint64_t value, uint64_t alignment) {
  // Sizes here come from data already held in memory, so they cannot overflow 64 bits.
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

uint64_t GgufWriter::data_offset() const { return align_up(header_size(), alignment_); }

uint64_t GgufWriter::file_size() const {
  uint64_t size = data_offset();
  for (const auto& t : tensors_) size += align_up(t.bytes().size(), alignment_);
  return size;
}

void GgufWriter::emit(Sink& sink) const {
  sink.put(kMagic, sizeof(kMagic));
  sink.scalar<uint32_t>(version_);
  sink.scalar<uint64_t>(tensors_.size());
  sink.scalar<uint64_t>(kvs_.size());
  for (const auto& kv : kvs_) {
    sink.string(kv.key);
    sink.scalar<uint32_t>(static_cast<uint32_t>(kv.value.type()));
    sink.put(kv.value.encoded().data(), kv.value.encoded().size());
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    sink.string(t.name);
    sink.scalar<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) sink.scalar<uint64_t>(d);
    sink.scalar<uint32_t>(static_cast<uint32_t>(t.type));
    sink.scalar<uint64_t>(offset);
    offset += align_up(t.bytes().size(), alignment_);
  }
  const uint64_t header = header_size();
  sink.zeros(align_up(header, alignment_) - header);
  for (const auto& t : tensors_) {
    auto bytes = t.bytes();
    sink.put(bytes.data(), bytes.size());
    sink.zeros(align_up(bytes.size(), alignment_) - bytes.size());
  }
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  out.reserve(file_size());
  Sink sink(&out);
  emit(sink);
  return out;
}

void GgufWriter::write(const std::filesystem::path& path) const {
  std::string temp = path.string() + ".XXXXXX";
  int fd = ::mkstemp(temp.data());
  if (fd < 0) {
    throw Error(Error::Kind::kIo,
                "cannot create a file beside '" + path.string() + "': " + std::strerror(errno));
  }
  try {
    Sink sink(fd, path.string());
    emit(sink);
    sink.flush();
    if (::fchmod(fd, 0644) != 0 || ::close(fd) != 0) {
      fd = -1;
      throw Error(Error::Kind::kIo,
                  "cannot write '" + path.string() + "': " + std::strerror(errno));
    }
    fd = -1;
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      throw Error(Error::Kind::kIo, "cannot rename '" + temp + "' to '" + path.string() +
                                        "': " + std::strerror(errno));
    }
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
}

}  // namespace llms::gguf
