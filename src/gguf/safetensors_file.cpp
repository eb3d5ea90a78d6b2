// gguf/safetensors_file: see the header for the contract.
//
// The header is read with a SAX handler that records only what a tensor needs (dtype, shape,
// data_offsets) and metadata strings. No JSON tree is built, so a hostile 100 MiB header costs
// memory in proportion to the tensors it declares, not to its token count; nesting is bounded
// explicitly; duplicate keys are seen as they stream by. Semantic checks (dtype, counts,
// offsets, overlaps) run afterwards over the recorded fields, in 64-bit checked arithmetic.
#include "gguf/safetensors_file.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "gguf/json_file.h"
#include "util/checked_math.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace llms::gguf {

namespace {

struct DtypeInfo {
  Dtype dtype;
  std::string_view name;
  uint32_t size;
};

constexpr std::array<DtypeInfo, 17> kDtypes = {{
    {Dtype::kBool, "BOOL", 1},
    {Dtype::kU8, "U8", 1},
    {Dtype::kI8, "I8", 1},
    {Dtype::kF8_E5M2, "F8_E5M2", 1},
    {Dtype::kF8_E4M3, "F8_E4M3", 1},
    {Dtype::kF8_E8M0, "F8_E8M0", 1},
    {Dtype::kI16, "I16", 2},
    {Dtype::kU16, "U16", 2},
    {Dtype::kF16, "F16", 2},
    {Dtype::kBF16, "BF16", 2},
    {Dtype::kI32, "I32", 4},
    {Dtype::kU32, "U32", 4},
    {Dtype::kF32, "F32", 4},
    {Dtype::kF64, "F64", 8},
    {Dtype::kI64, "I64", 8},
    {Dtype::kU64, "U64", 8},
    {Dtype::kC64, "C64", 8},
}};

// Dtypes of the format that pack several elements per byte; we do not read them.
constexpr std::array<std::string_view, 3> kSubByteDtypes = {"F4", "F6_E2M3", "F6_E3M2"};

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::string_view kIndexFileName = "model.safetensors.index.json";
constexpr std::string_view kSingleFileName = "model.safetensors";

// Quotes a name from the file for an error message: control bytes are escaped (a NUL would end
// the message early) and very long names are cut short.
std::string quote_name(std::string_view name) {
  constexpr size_t kMaxShown = 200;
  std::string out = "'";
  for (char c : name.substr(0, kMaxShown)) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  out += "'";
  if (name.size() > kMaxShown) {
    out += "... (";
    out += std::to_string(name.size());
    out += " bytes)";
  }
  return out;
}

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// What the header said about one tensor, before any semantic check.
struct RawTensor {
  std::string name;
  std::optional<std::string> dtype;
  bool has_shape = false;
  std::vector<uint64_t> shape;
  bool has_offsets = false;
  std::vector<uint64_t> offsets;
};

// Streams the header JSON into RawTensors and metadata. Every handler returns false with
// `error` set to stop the parse at the first problem.
class HeaderReader {
 public:
  using Json = nlohmann::json;

  std::vector<RawTensor> tensors;
  std::map<std::string, std::string> metadata;
  std::string error;

  bool null() { return value(Kind::kNull); }
  bool boolean(bool) { return value(Kind::kBool); }
  bool number_integer(Json::number_integer_t v) {
    if (v >= 0) return value(Kind::kUint, static_cast<uint64_t>(v));
    return value(Kind::kNegative, 0, v);
  }
  bool number_unsigned(Json::number_unsigned_t v) { return value(Kind::kUint, v); }
  bool number_float(Json::number_float_t, const Json::string_t&) { return value(Kind::kFloat); }
  bool string(Json::string_t& s) { return value(Kind::kString, 0, 0, &s); }
  bool binary(Json::binary_t&) { return value(Kind::kOther); }
  bool start_object(std::size_t) { return value(Kind::kObject); }
  bool start_array(std::size_t) { return value(Kind::kArray); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(Json::string_t& k) {
    switch (stack_.back()) {
      case Ctx::kRoot:
        if (k == kMetadataKey) {
          if (has_metadata_) return fail("duplicate key '__metadata__'");
          has_metadata_ = true;
        }
        key_ = std::move(k);
        return true;
      case Ctx::kMetadata:
        if (metadata.count(k) != 0)
          return fail(std::string("__metadata__: duplicate key ") + quote_name(k));
        meta_key_ = std::move(k);
        return true;
      case Ctx::kTensor:
        return tensor_field(k);
      default:
        return true;  // a key inside a skipped value
    }
  }

  bool parse_error(std::size_t position, const std::string&, const Json::exception& e) {
    return fail(std::string("header is not valid JSON (at byte ") + std::to_string(position) +
                "): " + e.what());
  }

 private:
  enum class Kind { kNull, kBool, kUint, kNegative, kFloat, kString, kOther, kObject, kArray };
  enum class Ctx { kRoot, kMetadata, kTensor, kShape, kOffsets, kSkip };
  enum class Field { kDtype, kShape, kOffsets, kOther };

  static std::string phrase(Kind kind) {
    switch (kind) {
      case Kind::kNull:
        return "null";
      case Kind::kBool:
        return "a boolean";
      case Kind::kUint:
        return "an integer";
      case Kind::kNegative:
        return "a negative integer";
      case Kind::kFloat:
        return "a non-integer number";
      case Kind::kString:
        return "a string";
      case Kind::kObject:
        return "an object";
      case Kind::kArray:
        return "an array";
      default:
        return "an unexpected value";
    }
  }

  bool fail(std::string message) {
    if (error.empty()) error = std::move(message);
    return false;
  }

  std::string tensor_where() const {
    return std::string("tensor ") + quote_name(tensors.back().name);
  }

  bool open(Ctx ctx) {
    if (stack_.size() >= kMaxSafetensorsJsonDepth) {
      return fail(std::string("header JSON nested deeper than ") +
                  std::to_string(kMaxSafetensorsJsonDepth) + " levels");
    }
    stack_.push_back(ctx);
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  bool tensor_field(std::string& k) {
    RawTensor& t = tensors.back();
    bool duplicate = false;
    if (k == "dtype") {
      field_ = Field::kDtype;
      duplicate = t.dtype.has_value();
    } else if (k == "shape") {
      field_ = Field::kShape;
      duplicate = t.has_shape;
      t.has_shape = true;
    } else if (k == "data_offsets") {
      field_ = Field::kOffsets;
      duplicate = t.has_offsets;
      t.has_offsets = true;
    } else {
      field_ = Field::kOther;  // unknown fields are ignored, as the reference reader does
    }
    if (duplicate) return fail(tensor_where() + ": duplicate field '" + k + "'");
    return true;
  }

  bool value(Kind kind, uint64_t u = 0, int64_t i = 0, std::string* s = nullptr) {
    bool is_container = kind == Kind::kObject || kind == Kind::kArray;
    if (stack_.empty()) {
      if (kind != Kind::kObject)
        return fail(std::string("header is ") + phrase(kind) + ", not a JSON object");
      return open(Ctx::kRoot);
    }
    switch (stack_.back()) {
      case Ctx::kRoot:
        if (key_ == kMetadataKey) {
          if (kind != Kind::kObject) {
            return fail(std::string("__metadata__ is ") + phrase(kind) +
                        ", expected an object of strings");
          }
          return open(Ctx::kMetadata);
        }
        if (kind != Kind::kObject) {
          return fail(std::string("tensor ") + quote_name(key_) + ": entry is " + phrase(kind) +
                      ", expected an object");
        }
        tensors.emplace_back();
        tensors.back().name = std::move(key_);
        return open(Ctx::kTensor);
      case Ctx::kMetadata:
        if (kind != Kind::kString) {
          return fail(std::string("__metadata__: value of ") + quote_name(meta_key_) + " is " +
                      phrase(kind) + ", expected a string");
        }
        metadata.emplace(std::move(meta_key_), std::move(*s));
        return true;
      case Ctx::kTensor:
        return tensor_value(kind, s);
      case Ctx::kShape:
        return list_element(kind, u, i, "shape", tensors.back().shape, kMaxSafetensorsRank);
      case Ctx::kOffsets:
        return list_element(kind, u, i, "data_offsets", tensors.back().offsets, 2);
      case Ctx::kSkip:
        return is_container ? open(Ctx::kSkip) : true;
    }
    return fail("internal error: unknown header state");
  }

  bool tensor_value(Kind kind, std::string* s) {
    RawTensor& t = tensors.back();
    switch (field_) {
      case Field::kDtype:
        if (kind != Kind::kString) {
          return fail(tensor_where() + ": dtype is " + phrase(kind) + ", expected a string");
        }
        t.dtype = std::move(*s);
        return true;
      case Field::kShape:
        if (kind != Kind::kArray) {
          return fail(tensor_where() + ": shape is " + phrase(kind) + ", expected an array");
        }
        return open(Ctx::kShape);
      case Field::kOffsets:
        if (kind != Kind::kArray) {
          return fail(tensor_where() + ": data_offsets is " + phrase(kind) + ", expected an array");
        }
        return open(Ctx::kOffsets);
      case Field::kOther:
        return kind == Kind::kObject || kind == Kind::kArray ? open(Ctx::kSkip) : true;
    }
    return fail("internal error: unknown tensor field");
  }

  bool list_element(Kind kind, uint64_t u, int64_t i, const char* field,
                    std::vector<uint64_t>& list, size_t max_size) {
    if (kind == Kind::kUint) {
      if (list.size() >= max_size) {
        return fail(tensor_where() + ": " + field + " has more than " + std::to_string(max_size) +
                    " entries");
      }
      list.push_back(u);
      return true;
    }
    std::string where = tensor_where() + ": " + field + "[" + std::to_string(list.size()) + "]";
    if (kind == Kind::kNegative) return fail(where + " is negative (" + std::to_string(i) + ")");
    if (kind == Kind::kFloat) {
      return fail(where + " is not an integer in [0, 2^64) (a fraction, exponent or too large)");
    }
    return fail(where + " is " + phrase(kind) + ", expected a non-negative integer");
  }

  std::vector<Ctx> stack_;
  bool has_metadata_ = false;
  std::string key_;       // the current key of the root object
  std::string meta_key_;  // the current key of __metadata__
  Field field_ = Field::kOther;
};

SafetensorsTensor check_tensor(RawTensor& raw, uint64_t data_size, const std::string& prefix) {
  std::string where = prefix + "tensor " + quote_name(raw.name) + ": ";
  if (raw.name.empty()) throw_invalid_file(prefix + "a tensor has an empty name");
  if (!raw.dtype) throw_invalid_file(where + "missing 'dtype'");
  if (!raw.has_shape) throw_invalid_file(where + "missing 'shape'");
  if (!raw.has_offsets) throw_invalid_file(where + "missing 'data_offsets'");

  auto dtype = dtype_from_name(*raw.dtype);
  if (!dtype) {
    bool sub_byte =
        std::find(kSubByteDtypes.begin(), kSubByteDtypes.end(), *raw.dtype) != kSubByteDtypes.end();
    if (sub_byte) {
      throw Error(Error::Kind::kUnsupported,
                  where + "dtype " + quote_name(*raw.dtype) + " (sub-byte) is not supported");
    }
    throw_invalid_file(where + "unknown dtype " + quote_name(*raw.dtype));
  }

  SafetensorsTensor t;
  t.name = std::move(raw.name);
  t.dtype = *dtype;
  t.shape = std::move(raw.shape);

  // A zero dimension makes the tensor empty whatever the others are.
  bool has_zero = std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
  uint64_t n_elements = has_zero ? 0 : 1;
  for (size_t d = 0; d < t.shape.size() && !has_zero; ++d) {
    auto product = checked_mul(n_elements, t.shape[d]);
    if (!product) {
      throw_invalid_file(where + "element count of shape " + shape_string(t.shape) +
                         " overflows 64 bits");
    }
    n_elements = *product;
  }
  auto n_bytes = checked_mul(n_elements, dtype_size(*dtype));
  if (!n_bytes) {
    throw_invalid_file(where + "byte size of shape " + shape_string(t.shape) + " of " +
                       std::string(dtype_name(*dtype)) + " overflows 64 bits");
  }
  t.n_elements = n_elements;
  t.n_bytes = *n_bytes;

  if (raw.offsets.size() != 2) {
    throw_invalid_file(where + "data_offsets has " + std::to_string(raw.offsets.size()) +
                       " entries, expected 2");
  }
  uint64_t begin = raw.offsets[0];
  uint64_t end = raw.offsets[1];
  if (begin > end) {
    throw_invalid_file(where + "data_offsets begin " + std::to_string(begin) + " is after end " +
                       std::to_string(end));
  }
  if (end > data_size) {
    throw_invalid_file(where + "data_offsets end " + std::to_string(end) +
                       " is past the end of the data buffer (" + std::to_string(data_size) +
                       " bytes; file truncated?)");
  }
  if (end - begin != t.n_bytes) {
    throw_invalid_file(where + "data_offsets span " + std::to_string(end - begin) +
                       " bytes but shape " + shape_string(t.shape) + " of " +
                       std::string(dtype_name(*dtype)) + " needs " + std::to_string(t.n_bytes));
  }
  t.offset = begin;
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Dtypes

std::string_view dtype_name(Dtype dtype) {
  for (const auto& info : kDtypes) {
    if (info.dtype == dtype) return info.name;
  }
  return "?";
}

std::optional<Dtype> dtype_from_name(std::string_view name) {
  for (const auto& info : kDtypes) {
    if (info.name == name) return info.dtype;
  }
  return std::nullopt;
}

uint32_t dtype_size(Dtype dtype) {
  for (const auto& info : kDtypes) {
    if (info.dtype == dtype) return info.size;
  }
  return 0;
}

std::span<const Dtype> all_dtypes() {
  static const auto kAll = [] {
    std::array<Dtype, kDtypes.size()> all{};
    for (size_t i = 0; i < kDtypes.size(); ++i) all[i] = kDtypes[i].dtype;
    return all;
  }();
  return kAll;
}

// ---------------------------------------------------------------------------------------------
// SafetensorsFile

struct SafetensorsFile::Impl {
  std::string source;
  MappedFile mapped;           // when opened from a path
  std::vector<uint8_t> owned;  // when built from bytes
  std::span<const uint8_t> bytes;
  uint64_t header_size = 0;
  std::vector<SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;

  std::span<const uint8_t> data() const { return bytes.subspan(8 + header_size); }
  void parse();
};

void SafetensorsFile::Impl::parse() {
  const std::string prefix = std::string("safetensors ") + quote_name(source) + ": ";
  if (bytes.size() < 8) {
    throw_invalid_file(prefix + "file is " + std::to_string(bytes.size()) +
                       " bytes, too small for the 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
  if (n > kMaxSafetensorsHeaderBytes) {
    throw_invalid_file(prefix + "header length " + std::to_string(n) + " exceeds the limit of " +
                       std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  }
  if (n > bytes.size() - 8) {
    throw_invalid_file(prefix + "header length " + std::to_string(n) +
                       " runs past the end of the file (" + std::to_string(bytes.size()) +
                       " bytes; file truncated?)");
  }
  header_size = n;

  const char* text = reinterpret_cast<const char*>(bytes.data() + 8);
  // nlohmann's lexer reads a NUL byte as the end of input, which would let bytes after it go
  // unread. Valid JSON never holds a raw NUL, so refuse it outright.
  if (const void* nul = std::memchr(text, 0, n); nul != nullptr) {
    throw_invalid_file(prefix + "header is not valid JSON: NUL byte at header offset " +
                       std::to_string(static_cast<const char*>(nul) - text));
  }
  HeaderReader reader;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(text, text + n, &reader, nlohmann::json::input_format_t::json,
                                   /*strict=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    throw_invalid_file(prefix + "header is not valid JSON: " + e.what());
  }
  if (!ok) {
    throw_invalid_file(prefix + (reader.error.empty() ? "header is not valid JSON" : reader.error));
  }

  const uint64_t data_size = bytes.size() - 8 - n;
  tensors.reserve(reader.tensors.size());
  for (auto& raw : reader.tensors) tensors.push_back(check_tensor(raw, data_size, prefix));
  metadata = std::move(reader.metadata);
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].name == tensors[i - 1].name) {
      throw_invalid_file(prefix + "duplicate tensor name " + quote_name(tensors[i].name));
    }
  }

  // Non-empty tensors must not share bytes: sort their ranges and compare neighbours.
  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& t : tensors) {
    if (t.n_bytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    const auto* cur = by_offset[i];
    if (cur->offset < prev->offset + prev->n_bytes) {  // no overflow: both end inside data
      throw_invalid_file(prefix + "tensors " + quote_name(prev->name) + " [" +
                         std::to_string(prev->offset) + ", " +
                         std::to_string(prev->offset + prev->n_bytes) + ") and " +
                         quote_name(cur->name) + " [" + std::to_string(cur->offset) + ", " +
                         std::to_string(cur->offset + cur->n_bytes) + ") overlap");
    }
  }
}

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  impl->source = path.string();
  impl->mapped = MappedFile::open(path);
  impl->bytes = impl->mapped.bytes();
  impl->parse();
  return SafetensorsFile(std::move(impl));
}

SafetensorsFile SafetensorsFile::from_bytes(std::span<const uint8_t> bytes,
                                            std::string_view source) {
  auto impl = std::make_unique<Impl>();
  impl->source = std::string(source);
  impl->owned.assign(bytes.begin(), bytes.end());
  impl->bytes = impl->owned;
  impl->parse();
  return SafetensorsFile(std::move(impl));
}

const std::string& SafetensorsFile::source() const { return impl_->source; }
uint64_t SafetensorsFile::file_size() const { return impl_->bytes.size(); }
uint64_t SafetensorsFile::header_size() const { return impl_->header_size; }
uint64_t SafetensorsFile::data_offset() const { return 8 + impl_->header_size; }
uint64_t SafetensorsFile::data_size() const { return impl_->data().size(); }
const std::vector<SafetensorsTensor>& SafetensorsFile::tensors() const { return impl_->tensors; }
const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
  return impl_->metadata;
}

const SafetensorsTensor* SafetensorsFile::find_tensor(std::string_view name) const {
  const auto& tensors = impl_->tensors;
  auto it =
      std::lower_bound(tensors.begin(), tensors.end(), name,
                       [](const SafetensorsTensor& t, std::string_view n) { return t.name < n; });
  if (it == tensors.end() || it->name != name) return nullptr;
  return &*it;
}

std::span<const uint8_t> SafetensorsFile::tensor_data(const SafetensorsTensor& tensor) const {
  auto data = impl_->data();
  auto end = checked_add(tensor.offset, tensor.n_bytes);
  if (!end || *end > data.size()) {
    throw Error(Error::Kind::kInvalidArgument, std::string("tensor ") + quote_name(tensor.name) +
                                                   " does not lie inside the data of " +
                                                   quote_name(impl_->source));
  }
  return data.subspan(tensor.offset, tensor.n_bytes);
}

// ---------------------------------------------------------------------------------------------
// ShardedSafetensors

namespace {

// A shard named by an index must be a plain file name in the index's own directory.
bool is_plain_file_name(std::string_view name) {
  if (name.empty() || name == "." || name.find("..") != std::string_view::npos) return false;
  for (char c : name) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '/' || c == '\\' || byte < 0x20 || byte == 0x7f) return false;
  }
  return true;
}

}  // namespace

struct ShardedSafetensors::Impl {
  bool sharded = false;
  std::vector<SafetensorsFile> shards;
  std::vector<std::filesystem::path> paths;
  std::vector<Entry> entries;

  const Entry* find(std::string_view name) const {
    auto it =
        std::lower_bound(entries.begin(), entries.end(), name,
                         [](const Entry& e, std::string_view n) { return e.tensor->name < n; });
    if (it == entries.end() || it->tensor->name != name) return nullptr;
    return &*it;
  }

  void open_single(const std::filesystem::path& path);
  void open_index(const std::filesystem::path& index_path);
};

void ShardedSafetensors::Impl::open_single(const std::filesystem::path& path) {
  shards.push_back(SafetensorsFile::open(path));
  paths.push_back(path);
  for (const auto& t : shards.back().tensors()) entries.push_back(Entry{&t, 0});
}

void ShardedSafetensors::Impl::open_index(const std::filesystem::path& index_path) {
  sharded = true;
  const std::string prefix =
      std::string("safetensors index ") + quote_name(index_path.string()) + ": ";
  nlohmann::json index = read_json_file(index_path);
  if (!index.is_object()) {
    throw_invalid_file(prefix + "top-level value is " + std::string(json_type_phrase(index)) +
                       ", expected an object");
  }
  auto map_it = index.find("weight_map");
  if (map_it == index.end()) throw_invalid_file(prefix + "missing 'weight_map'");
  const nlohmann::json& weight_map = *map_it;
  if (!weight_map.is_object()) {
    throw_invalid_file(prefix + "weight_map is " + std::string(json_type_phrase(weight_map)) +
                       ", expected an object");
  }
  if (weight_map.empty()) throw_invalid_file(prefix + "weight_map is empty");

  // First pass: check every shard name and give each distinct shard an index.
  std::map<std::string, size_t, std::less<>> shard_index;
  std::vector<std::string> shard_names;
  for (const auto& [tensor_name, shard] : weight_map.items()) {
    if (!shard.is_string()) {
      throw_invalid_file(prefix + "weight_map entry " + quote_name(tensor_name) + " is " +
                         std::string(json_type_phrase(shard)) + ", expected a shard file name");
    }
    const auto& shard_name = shard.get_ref<const std::string&>();
    if (!is_plain_file_name(shard_name)) {
      throw_invalid_file(prefix + "weight_map entry " + quote_name(tensor_name) + " names shard " +
                         quote_name(shard_name) +
                         ", which is not a plain file name (path separators, '..' and control "
                         "characters are refused)");
    }
    if (shard_index.emplace(shard_name, shard_names.size()).second) {
      shard_names.push_back(shard_name);
    }
  }

  const std::filesystem::path dir = index_path.parent_path();
  for (const auto& name : shard_names) {
    std::filesystem::path path = dir / name;
    try {
      shards.push_back(SafetensorsFile::open(path));
    } catch (const Error& e) {
      throw Error(e.kind(), prefix + "shard " + quote_name(name) + ": " + e.what());
    }
    paths.push_back(std::move(path));
  }

  // weight_map iterates in key order, so entries come out sorted by name.
  for (const auto& [tensor_name, shard] : weight_map.items()) {
    size_t i = shard_index.find(shard.get_ref<const std::string&>())->second;
    const SafetensorsTensor* tensor = shards[i].find_tensor(tensor_name);
    if (tensor == nullptr) {
      throw_invalid_file(prefix + "tensor " + quote_name(tensor_name) + " is mapped to shard " +
                         quote_name(shard_names[i]) + ", which does not contain it");
    }
    entries.push_back(Entry{tensor, i});
  }
}

ShardedSafetensors::ShardedSafetensors(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShardedSafetensors::ShardedSafetensors(ShardedSafetensors&&) noexcept = default;
ShardedSafetensors& ShardedSafetensors::operator=(ShardedSafetensors&&) noexcept = default;
ShardedSafetensors::~ShardedSafetensors() = default;

ShardedSafetensors ShardedSafetensors::open(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    auto index = path / kIndexFileName;
    auto single = path / kSingleFileName;
    if (std::filesystem::exists(index, ec)) {
      impl->open_index(index);
    } else if (std::filesystem::exists(single, ec)) {
      impl->open_single(single);
    } else {
      throw Error(Error::Kind::kNotFound, std::string("no ") + std::string(kIndexFileName) +
                                              " or " + std::string(kSingleFileName) + " in " +
                                              quote_name(path.string()));
    }
  } else if (path.extension() == ".json") {
    impl->open_index(path);
  } else {
    impl->open_single(path);
  }
  return ShardedSafetensors(std::move(impl));
}

bool ShardedSafetensors::is_sharded() const { return impl_->sharded; }
size_t ShardedSafetensors::n_shards() const { return impl_->shards.size(); }
const SafetensorsFile& ShardedSafetensors::shard(size_t index) const {
  return impl_->shards.at(index);
}
const std::filesystem::path& ShardedSafetensors::shard_path(size_t index) const {
  return impl_->paths.at(index);
}
const std::vector<ShardedSafetensors::Entry>& ShardedSafetensors::tensors() const {
  return impl_->entries;
}

const SafetensorsTensor* ShardedSafetensors::find_tensor(std::string_view name) const {
  const Entry* entry = impl_->find(name);
  return entry == nullptr ? nullptr : entry->tensor;
}

std::span<const uint8_t> ShardedSafetensors::tensor_data(const SafetensorsTensor& tensor) const {
  const Entry* entry = impl_->find(tensor.name);
  if (entry == nullptr) {
    throw Error(Error::Kind::kInvalidArgument, std::string("tensor ") + quote_name(tensor.name) +
                                                   " is not in these safetensors weights");
  }
  return impl_->shards[entry->shard_index].tensor_data(tensor);
}

}  // namespace llms::gguf
