// gguf/gguf_file: parsing and validation of GGUF files (see gguf_file.h for the contract).
//
// The parser reads through a bounds-checked cursor; every size read from the file is compared
// with the bytes that remain before anything is allocated or indexed, using checked 64-bit math.
// Errors are phrased "GGUF: <where>: <what>", naming the key or tensor in quotes.
#include "gguf/gguf_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "util/checked_math.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace llms::gguf {

namespace {

constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxAlignment = 1u << 20;  // real files use 32; refuse absurd padding
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;  // arrays of arrays nest at most this deep
constexpr uint64_t kMaxTensorNameBytes = 1024;
// Smallest encodings, used to refuse counts the remaining bytes cannot possibly hold.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;  // key length, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes =
    8 + 4 + 8 + 4 + 8;                      // name length, n_dims, 1 dim, type, offset
constexpr uint64_t kMinArrayBytes = 4 + 8;  // element type, count

[[noreturn]] void fail(const std::string& message) { throw_invalid_file("GGUF: " + message); }

std::string quote_name(std::string_view s) {
  constexpr size_t kMaxShown = 80;
  std::string out = "'";
  out.append(s.substr(0, kMaxShown));
  if (s.size() > kMaxShown) out += "...";
  out += "'";
  return out;
}

// Size in bytes of a scalar value type; 0 for string/array; nullopt for unknown types.
std::optional<uint64_t> scalar_size(uint32_t raw_type) {
  switch (static_cast<ValueType>(raw_type)) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return 0;
  }
  return std::nullopt;
}

bool is_known_value_type(uint32_t raw_type) { return scalar_size(raw_type).has_value(); }

bool is_float_type(ValueType t) { return t == ValueType::kFloat32 || t == ValueType::kFloat64; }
bool is_signed_type(ValueType t) {
  return t == ValueType::kInt8 || t == ValueType::kInt16 || t == ValueType::kInt32 ||
         t == ValueType::kInt64;
}

// Decodes one little-endian scalar of `type` at `p` into the 64-bit representation Value keeps:
// unsigned as is, signed as two's complement int64, floats as the bits of a double.
uint64_t decode_scalar(ValueType type, const uint8_t* p) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kBool:
      return p[0];
    case ValueType::kInt8:
      return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(p[0])));
    case ValueType::kUint16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case ValueType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
    case ValueType::kUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case ValueType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
    case ValueType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return std::bit_cast<uint64_t>(static_cast<double>(v));
    }
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case ValueType::kString:
    case ValueType::kArray:
      break;
  }
  return 0;
}

// The types a well-known key must have; a file that disagrees is refused at open.
enum class Expect { kString, kUint32, kInteger, kStringArray, kFloatArray, kIntegerArray };

struct KnownKey {
  std::string_view key;
  Expect expect;
};

constexpr KnownKey kKnownKeys[] = {
    {"general.alignment", Expect::kUint32},
    {"general.architecture", Expect::kString},
    {"general.name", Expect::kString},
    {"general.file_type", Expect::kInteger},
    {"general.quantization_version", Expect::kInteger},
    {"tokenizer.ggml.model", Expect::kString},
    {"tokenizer.ggml.pre", Expect::kString},
    {"tokenizer.ggml.tokens", Expect::kStringArray},
    {"tokenizer.ggml.merges", Expect::kStringArray},
    {"tokenizer.ggml.scores", Expect::kFloatArray},
    {"tokenizer.ggml.token_type", Expect::kIntegerArray},
    {"tokenizer.chat_template", Expect::kString},
};

std::string_view expect_name(Expect e) {
  switch (e) {
    case Expect::kString:
      return "string";
    case Expect::kUint32:
      return "uint32";
    case Expect::kInteger:
      return "an integer";
    case Expect::kStringArray:
      return "array of string";
    case Expect::kFloatArray:
      return "array of float";
    case Expect::kIntegerArray:
      return "array of integer";
  }
  return "?";
}

bool matches(const Value& v, Expect e) {
  switch (e) {
    case Expect::kString:
      return v.type() == ValueType::kString;
    case Expect::kUint32:
      return v.type() == ValueType::kUint32;
    case Expect::kInteger:
      return is_integer_type(v.type());
    case Expect::kStringArray:
      return v.type() == ValueType::kArray && v.element_type() == ValueType::kString;
    case Expect::kFloatArray:
      return v.type() == ValueType::kArray && is_float_type(v.element_type());
    case Expect::kIntegerArray:
      return v.type() == ValueType::kArray && is_integer_type(v.element_type());
  }
  return false;
}

std::string describe_type(const Value& v) {
  std::string s(value_type_name(v.type()));
  if (v.type() == ValueType::kArray) s += " of " + std::string(value_type_name(v.element_type()));
  return s;
}

}  // namespace

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
      return "uint8";
    case ValueType::kInt8:
      return "int8";
    case ValueType::kUint16:
      return "uint16";
    case ValueType::kInt16:
      return "int16";
    case ValueType::kUint32:
      return "uint32";
    case ValueType::kInt32:
      return "int32";
    case ValueType::kFloat32:
      return "float32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kUint64:
      return "uint64";
    case ValueType::kInt64:
      return "int64";
    case ValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

bool is_integer_type(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64:
      return true;
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------------------------
// Value

std::optional<uint64_t> Value::as_uint() const {
  if (!is_integer_type(type_)) return std::nullopt;
  if (is_signed_type(type_) && static_cast<int64_t>(scalar_bits_) < 0) return std::nullopt;
  return scalar_bits_;
}

std::optional<int64_t> Value::as_int() const {
  if (!is_integer_type(type_)) return std::nullopt;
  if (!is_signed_type(type_) && scalar_bits_ > static_cast<uint64_t>(INT64_MAX)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(scalar_bits_);
}

std::optional<double> Value::as_float() const {
  if (is_float_type(type_)) return std::bit_cast<double>(scalar_bits_);
  if (is_signed_type(type_)) return static_cast<double>(static_cast<int64_t>(scalar_bits_));
  if (is_integer_type(type_)) return static_cast<double>(scalar_bits_);
  return std::nullopt;
}

std::optional<bool> Value::as_bool() const {
  if (type_ != ValueType::kBool) return std::nullopt;
  return scalar_bits_ != 0;
}

std::optional<std::string_view> Value::as_string() const {
  if (type_ != ValueType::kString) return std::nullopt;
  return std::string_view(reinterpret_cast<const char*>(data_), string_size_);
}

Value Value::element(uint64_t i) const {
  Value v;
  if (type_ != ValueType::kArray || i >= count_) return v;
  if (element_type_ == ValueType::kString) {
    std::string_view s = (*strings_)[i];
    v.type_ = ValueType::kString;
    v.data_ = reinterpret_cast<const uint8_t*>(s.data());
    v.string_size_ = s.size();
    return v;
  }
  if (element_type_ == ValueType::kArray) return (*items_)[i];
  uint64_t size = *scalar_size(static_cast<uint32_t>(element_type_));
  v.type_ = element_type_;
  v.scalar_bits_ = decode_scalar(element_type_, data_ + i * size);
  return v;
}

std::optional<std::vector<std::string>> Value::to_strings() const {
  if (type_ != ValueType::kArray || element_type_ != ValueType::kString) return std::nullopt;
  return std::vector<std::string>(strings_->begin(), strings_->end());
}

std::optional<std::vector<double>> Value::to_floats() const {
  if (type_ != ValueType::kArray ||
      !(is_float_type(element_type_) || is_integer_type(element_type_))) {
    return std::nullopt;
  }
  std::vector<double> out;
  out.reserve(count_);
  for (uint64_t i = 0; i < count_; ++i) out.push_back(*element(i).as_float());
  return out;
}

std::optional<std::vector<int64_t>> Value::to_ints() const {
  if (type_ != ValueType::kArray || !is_integer_type(element_type_)) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(count_);
  for (uint64_t i = 0; i < count_; ++i) {
    auto v = element(i).as_int();
    if (!v) return std::nullopt;  // a uint64 beyond INT64_MAX
    out.push_back(*v);
  }
  return out;
}

std::string Value::to_display_string(size_t max_items) const {
  constexpr size_t kMaxChars = 120;
  switch (type_) {
    case ValueType::kString: {
      std::string_view s = *as_string();
      std::string out = "\"";
      for (char c : s.substr(0, kMaxChars)) {
        if (c == '\n') {
          out += "\\n";
        } else if (c == '"' || c == '\\') {
          out += '\\';
          out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
          out += '?';
        } else {
          out += c;
        }
      }
      if (s.size() > kMaxChars) out += "...";
      return out + "\"";
    }
    case ValueType::kBool:
      return scalar_bits_ ? "true" : "false";
    case ValueType::kFloat32:
    case ValueType::kFloat64: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", *as_float());
      return buf;
    }
    case ValueType::kArray: {
      std::string out = "[";
      uint64_t shown = std::min<uint64_t>(count_, max_items);
      for (uint64_t i = 0; i < shown; ++i) {
        if (i) out += ", ";
        out += element(i).to_display_string(max_items);
      }
      if (shown < count_) out += ", ... (" + std::to_string(count_) + " items)";
      return out + "]";
    }
    default:
      if (is_signed_type(type_)) return std::to_string(static_cast<int64_t>(scalar_bits_));
      return std::to_string(scalar_bits_);
  }
}

// ---------------------------------------------------------------------------------------------
// Parser

struct GgufFile::Impl {
  MappedFile mapped;
  std::vector<uint8_t> owned;
  std::span<const uint8_t> bytes;
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<KeyValue> metadata;
  std::unordered_map<std::string_view, size_t> key_index;
  std::vector<TensorInfo> tensors;
  std::unordered_map<std::string_view, size_t> tensor_index;
};

class GgufParser {
 public:
  explicit GgufParser(GgufFile::Impl& impl) : impl_(impl), bytes_(impl.bytes) {}

  void parse() {
    parse_header();
    parse_metadata();
    apply_alignment();
    parse_tensor_infos();
    place_tensors();
  }

 private:
  uint64_t remaining() const { return bytes_.size() - pos_; }

  void need(uint64_t n, const std::string& what) {
    if (n > remaining()) {
      fail("file truncated while reading " + what + " (needs " + std::to_string(n) +
           " bytes at offset " + std::to_string(pos_) + ", file has " +
           std::to_string(bytes_.size()) + ")");
    }
  }

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string_view read_string(const std::string& what) {
    uint64_t len = read<uint64_t>(what + " length");
    if (len > remaining()) {
      fail(what + " length " + std::to_string(len) + " runs past the end of the file");
    }
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  // read_string for element i of an array; the error text is built only on failure, since
  // vocabularies hold hundreds of thousands of strings.
  std::string_view read_element_string(const std::string& where, uint64_t i) {
    uint64_t len = 0;
    if (remaining() >= sizeof len) std::memcpy(&len, bytes_.data() + pos_, sizeof len);
    if (remaining() < sizeof len || len > remaining() - sizeof len) {
      return read_string(where + " element " + std::to_string(i));  // throws with the context
    }
    pos_ += sizeof len;
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  void parse_header() {
    need(4, "magic");
    if (std::memcmp(bytes_.data(), kMagic, 4) != 0) fail("bad magic: not a GGUF file");
    pos_ = 4;
    impl_.version = read<uint32_t>("version");
    if (impl_.version == 1) {
      throw Error(Error::Kind::kUnsupported, "GGUF: version 1 files are not supported");
    }
    if (impl_.version != 2 && impl_.version != 3) {
      fail("unknown version " + std::to_string(impl_.version) + " (supported: 2, 3)");
    }
    n_tensors_ = read<uint64_t>("tensor count");
    n_kv_ = read<uint64_t>("metadata count");
    auto kv_floor = checked_mul(n_kv_, kMinKeyValueBytes);
    if (!kv_floor || *kv_floor > remaining()) {
      fail("metadata count " + std::to_string(n_kv_) + " is more than the file could hold");
    }
    auto tensor_floor = checked_mul(n_tensors_, kMinTensorInfoBytes);
    if (!tensor_floor || *tensor_floor > remaining()) {
      fail("tensor count " + std::to_string(n_tensors_) + " is more than the file could hold");
    }
  }

  void parse_metadata() {
    impl_.metadata.reserve(n_kv_);
    for (uint64_t i = 0; i < n_kv_; ++i) {
      std::string_view key = read_string("key of metadata entry " + std::to_string(i));
      if (key.empty()) fail("metadata entry " + std::to_string(i) + " has an empty key");
      std::string where = "key " + quote_name(key);
      uint32_t raw_type = read<uint32_t>("type of " + where);
      Value value = parse_value(raw_type, where, 0);
      if (impl_.key_index.count(key)) fail("duplicate metadata " + where);
      impl_.metadata.push_back({std::string(key), std::move(value)});
      impl_.key_index.emplace(impl_.metadata.back().key, impl_.metadata.size() - 1);
    }
    // key_index views point into the KeyValue strings; reserve() above keeps them stable.
    for (const auto& known : kKnownKeys) {
      auto it = impl_.key_index.find(known.key);
      if (it == impl_.key_index.end()) continue;
      const Value& v = impl_.metadata[it->second].value;
      if (!matches(v, known.expect)) {
        fail("key " + quote_name(known.key) + " has type " + describe_type(v) + ", expected " +
             std::string(expect_name(known.expect)));
      }
    }
  }

  Value parse_value(uint32_t raw_type, const std::string& where, int depth) {
    if (!is_known_value_type(raw_type)) {
      fail(where + " has unknown value type " + std::to_string(raw_type));
    }
    Value v;
    v.type_ = static_cast<ValueType>(raw_type);
    if (v.type_ == ValueType::kString) {
      std::string_view s = read_string("string value of " + where);
      v.data_ = reinterpret_cast<const uint8_t*>(s.data());
      v.string_size_ = s.size();
      return v;
    }
    if (v.type_ != ValueType::kArray) {
      uint64_t size = *scalar_size(raw_type);
      need(size, "value of " + where);
      v.scalar_bits_ = decode_scalar(v.type_, bytes_.data() + pos_);
      if (v.type_ == ValueType::kBool && v.scalar_bits_ > 1) {
        fail(where + " has bool value " + std::to_string(v.scalar_bits_) + " (must be 0 or 1)");
      }
      pos_ += size;
      return v;
    }
    if (depth >= kMaxArrayDepth) {
      fail(where + " nests arrays deeper than " + std::to_string(kMaxArrayDepth) + " levels");
    }
    uint32_t element_raw = read<uint32_t>("array element type of " + where);
    if (!is_known_value_type(element_raw)) {
      fail(where + " is an array of unknown value type " + std::to_string(element_raw));
    }
    v.element_type_ = static_cast<ValueType>(element_raw);
    v.count_ = read<uint64_t>("array length of " + where);
    uint64_t element_floor = *scalar_size(element_raw);
    if (v.element_type_ == ValueType::kString) element_floor = 8;
    if (v.element_type_ == ValueType::kArray) element_floor = kMinArrayBytes;
    auto floor_bytes = checked_mul(v.count_, element_floor);
    if (!floor_bytes || *floor_bytes > remaining()) {
      fail(where + ": array of " + std::to_string(v.count_) + " " +
           std::string(value_type_name(v.element_type_)) + " values runs past the end of the file");
    }
    if (v.element_type_ == ValueType::kString) {
      auto strings = std::make_shared<std::vector<std::string_view>>();
      strings->reserve(v.count_);
      for (uint64_t i = 0; i < v.count_; ++i) strings->push_back(read_element_string(where, i));
      v.strings_ = std::move(strings);
    } else if (v.element_type_ == ValueType::kArray) {
      auto items = std::make_shared<std::vector<Value>>();
      items->reserve(v.count_);
      for (uint64_t i = 0; i < v.count_; ++i) {
        std::string item_where = where + " element " + std::to_string(i);
        items->push_back(
            parse_value(static_cast<uint32_t>(ValueType::kArray), item_where, depth + 1));
      }
      v.items_ = std::move(items);
    } else {
      v.data_ = bytes_.data() + pos_;
      if (v.element_type_ == ValueType::kBool) {
        for (uint64_t i = 0; i < v.count_; ++i) {
          if (v.data_[i] > 1) {
            fail(where + " element " + std::to_string(i) + " has bool value " +
                 std::to_string(v.data_[i]) + " (must be 0 or 1)");
          }
        }
      }
      pos_ += *floor_bytes;
    }
    return v;
  }

  void apply_alignment() {
    auto it = impl_.key_index.find("general.alignment");
    if (it == impl_.key_index.end()) return;
    uint64_t a = *impl_.metadata[it->second].value.as_uint();
    if (!is_power_of_two(a) || a > kMaxAlignment) {
      fail("key 'general.alignment' is " + std::to_string(a) +
           "; it must be a power of two between 1 and " + std::to_string(kMaxAlignment));
    }
    impl_.alignment = a;
  }

  void parse_tensor_infos() {
    impl_.tensors.reserve(n_tensors_);
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      TensorInfo t;
      std::string index_where = "tensor #" + std::to_string(i);
      std::string_view name = read_string("name of " + index_where);
      if (name.empty()) fail(index_where + " has an empty name");
      if (name.size() > kMaxTensorNameBytes) {
        fail(index_where + " name is " + std::to_string(name.size()) + " bytes long (max " +
             std::to_string(kMaxTensorNameBytes) + ")");
      }
      t.name = std::string(name);
      std::string where = "tensor " + quote_name(name);
      t.n_dims = read<uint32_t>("n_dims of " + where);
      if (t.n_dims == 0 || t.n_dims > kMaxDims) {
        fail(where + " has n_dims " + std::to_string(t.n_dims) + " (must be 1.." +
             std::to_string(kMaxDims) + ")");
      }
      uint64_t n_elements = 1;
      for (uint32_t d = 0; d < t.n_dims; ++d) {
        uint64_t ne = read<uint64_t>("dimension " + std::to_string(d) + " of " + where);
        if (static_cast<int64_t>(ne) <= 0) {
          fail(where + " has dimension " + std::to_string(d) + " = " +
               std::to_string(static_cast<int64_t>(ne)) + " (must be positive)");
        }
        t.ne[d] = ne;
        auto product = checked_mul(n_elements, ne);
        if (!product || *product > static_cast<uint64_t>(INT64_MAX)) {
          fail(where + ": element count overflows 64 bits");
        }
        n_elements = *product;
      }
      t.n_elements = n_elements;
      uint32_t raw_type = read<uint32_t>("type of " + where);
      auto info = ggml_type_info(raw_type);
      if (!info) fail(where + " has unknown tensor type " + std::to_string(raw_type));
      t.type = info->type;
      if (t.ne[0] % info->block_size != 0) {
        fail(where + " of type " + std::string(info->name) +
             ": ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the block size " +
             std::to_string(info->block_size));
      }
      auto n_bytes = checked_mul(n_elements / info->block_size, info->type_size);
      if (!n_bytes) fail(where + ": byte size overflows 64 bits");
      t.n_bytes = *n_bytes;
      t.offset = read<uint64_t>("offset of " + where);
      if (t.offset % impl_.alignment != 0) {
        fail(where + " offset " + std::to_string(t.offset) +
             " is not a multiple of the alignment " + std::to_string(impl_.alignment));
      }
      impl_.tensors.push_back(std::move(t));
    }
    for (size_t i = 0; i < impl_.tensors.size(); ++i) {
      auto [it, inserted] = impl_.tensor_index.emplace(impl_.tensors[i].name, i);
      if (!inserted) fail("duplicate tensor name " + quote_name(impl_.tensors[i].name));
    }
  }

  void place_tensors() {
    auto data_offset = checked_align_up(pos_, impl_.alignment);
    if (!data_offset) fail("data section offset overflows 64 bits");
    if (impl_.tensors.empty()) {
      impl_.data_offset = std::min<uint64_t>(*data_offset, bytes_.size());
      return;
    }
    if (*data_offset > bytes_.size()) fail("file truncated before the tensor data section");
    impl_.data_offset = *data_offset;
    uint64_t data_size = bytes_.size() - *data_offset;
    for (const auto& t : impl_.tensors) {
      auto end = checked_add(t.offset, t.n_bytes);
      if (!end || *end > data_size) {
        fail("tensor " + quote_name(t.name) + " data (offset " + std::to_string(t.offset) + ", " +
             std::to_string(t.n_bytes) + " bytes) runs past the end of the file");
      }
    }
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(impl_.tensors.size());
    for (const auto& t : impl_.tensors) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const TensorInfo& prev = *by_offset[i - 1];
      if (prev.offset + prev.n_bytes > by_offset[i]->offset) {
        fail("tensor " + quote_name(by_offset[i]->name) + " overlaps tensor " +
             quote_name(prev.name));
      }
    }
  }

  GgufFile::Impl& impl_;
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

// ---------------------------------------------------------------------------------------------
// GgufFile

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  impl->mapped = MappedFile::open(path);
  impl->bytes = impl->mapped.bytes();
  try {
    GgufParser(*impl).parse();
  } catch (const Error& e) {
    throw Error(e.kind(), path.filename().string() + ": " + e.what());
  }
  return GgufFile(std::move(impl));
}

GgufFile GgufFile::from_bytes(std::span<const uint8_t> bytes) {
  auto impl = std::make_unique<Impl>();
  impl->owned.assign(bytes.begin(), bytes.end());
  impl->bytes = impl->owned;
  GgufParser(*impl).parse();
  return GgufFile(std::move(impl));
}

uint32_t GgufFile::version() const { return impl_->version; }
uint64_t GgufFile::alignment() const { return impl_->alignment; }
uint64_t GgufFile::data_offset() const { return impl_->data_offset; }
uint64_t GgufFile::file_size() const { return impl_->bytes.size(); }
const std::vector<KeyValue>& GgufFile::metadata() const { return impl_->metadata; }
const std::vector<TensorInfo>& GgufFile::tensors() const { return impl_->tensors; }

const Value* GgufFile::find(std::string_view key) const {
  auto it = impl_->key_index.find(key);
  return it == impl_->key_index.end() ? nullptr : &impl_->metadata[it->second].value;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

std::span<const uint8_t> GgufFile::tensor_data(const TensorInfo& tensor) const {
  return impl_->bytes.subspan(impl_->data_offset + tensor.offset, tensor.n_bytes);
}

namespace {

template <typename T>
std::optional<T> typed(const Value* v, std::string_view key, std::optional<T> converted,
                       std::string_view wanted) {
  if (v == nullptr) return std::nullopt;
  if (!converted) {
    throw_invalid_file("GGUF: key " + quote_name(key) + " has type " + describe_type(*v) +
                       " (value " + v->to_display_string(4) + "), expected " + std::string(wanted));
  }
  return converted;
}

}  // namespace

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const Value* v = find(key);
  return typed<uint64_t>(v, key, v ? v->as_uint() : std::nullopt, "a non-negative integer");
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  return typed<int64_t>(v, key, v ? v->as_int() : std::nullopt, "an integer");
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  return typed<double>(v, key, v ? v->as_float() : std::nullopt, "a number");
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  return typed<bool>(v, key, v ? v->as_bool() : std::nullopt, "bool");
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  std::optional<std::string> s;
  if (v && v->as_string()) s = std::string(*v->as_string());
  return typed<std::string>(v, key, s, "string");
}

std::optional<std::vector<std::string>> GgufFile::get_strings(std::string_view key) const {
  const Value* v = find(key);
  return typed<std::vector<std::string>>(v, key, v ? v->to_strings() : std::nullopt,
                                         "array of string");
}

std::optional<std::vector<double>> GgufFile::get_floats(std::string_view key) const {
  const Value* v = find(key);
  return typed<std::vector<double>>(v, key, v ? v->to_floats() : std::nullopt, "array of numbers");
}

std::optional<std::vector<int64_t>> GgufFile::get_ints(std::string_view key) const {
  const Value* v = find(key);
  return typed<std::vector<int64_t>>(v, key, v ? v->to_ints() : std::nullopt, "array of integers");
}

}  // namespace llms::gguf
