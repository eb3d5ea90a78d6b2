// structured/json_schema_document: see json_schema_document.h.
#include "structured/json_schema_document.h"

#include <optional>
#include <vector>

#include "util/error.h"

namespace llms::structured::jsonschema {

using Json = nlohmann::ordered_json;

std::string escape_pointer_token(std::string_view token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

namespace {

[[noreturn]] void refuse(const std::string& message) {
  throw Error(Error::Kind::kInvalidArgument, message);
}

std::string shown_pointer(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

struct Uri {
  std::optional<std::string> scheme, authority, query, fragment;
  std::string path;
};

Uri parse_uri(const std::string& text) {
  Uri uri;
  size_t pos = 0;
  const size_t colon = text.find(':');
  if (colon != std::string::npos && colon > 0 && text.find_first_of("/?#") > colon) {
    bool valid = std::isalpha(static_cast<unsigned char>(text[0])) != 0;
    for (size_t i = 1; i < colon && valid; ++i) {
      const char c = text[i];
      valid = std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
    }
    if (valid) {
      uri.scheme = text.substr(0, colon);
      pos = colon + 1;
    }
  }
  if (text.compare(pos, 2, "//") == 0) {
    const size_t end = text.find_first_of("/?#", pos + 2);
    uri.authority =
        text.substr(pos + 2, end == std::string::npos ? std::string::npos : end - pos - 2);
    pos = end == std::string::npos ? text.size() : end;
  }
  const size_t path_end = text.find_first_of("?#", pos);
  uri.path = text.substr(pos, path_end == std::string::npos ? std::string::npos : path_end - pos);
  pos = path_end == std::string::npos ? text.size() : path_end;
  if (pos < text.size() && text[pos] == '?') {
    const size_t end = text.find('#', pos);
    uri.query = text.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
    pos = end == std::string::npos ? text.size() : end;
  }
  if (pos < text.size() && text[pos] == '#') uri.fragment = text.substr(pos + 1);
  return uri;
}

std::string remove_dot_segments(const std::string& path) {
  std::vector<std::string> output;
  const bool absolute = !path.empty() && path[0] == '/';
  size_t pos = absolute ? 1 : 0;
  bool trailing_slash = false;
  while (pos <= path.size()) {
    const size_t end = std::min(path.find('/', pos), path.size());
    const std::string segment = path.substr(pos, end - pos);
    trailing_slash = false;
    if (segment == "..") {
      if (!output.empty()) output.pop_back();
      trailing_slash = true;
    } else if (segment == ".") {
      trailing_slash = true;
    } else {
      output.push_back(segment);
    }
    pos = end + 1;
  }
  std::string out = absolute ? "/" : "";
  for (size_t i = 0; i < output.size(); ++i) {
    if (i) out += "/";
    out += output[i];
  }
  if (trailing_slash && !output.empty()) out += "/";
  return out;
}

std::string compose(const Uri& uri) {
  std::string out;
  if (uri.scheme) out += *uri.scheme + ":";
  if (uri.authority) out += "//" + *uri.authority;
  out += uri.path;
  if (uri.query) out += "?" + *uri.query;
  if (uri.fragment) out += "#" + *uri.fragment;
  return out;
}

std::string percent_decode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() &&
        std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// Keywords whose value is one subschema, an array of them, or a map of names to them.
bool is_single_schema_keyword(const std::string& key) {
  static const char* const kKeys[] = {"additionalItems",
                                      "additionalProperties",
                                      "contains",
                                      "propertyNames",
                                      "not",
                                      "if",
                                      "then",
                                      "else",
                                      "unevaluatedItems",
                                      "unevaluatedProperties",
                                      "contentSchema",
                                      "items"};
  for (const char* k : kKeys) {
    if (key == k) return true;
  }
  return false;
}

bool is_schema_array_keyword(const std::string& key) {
  return key == "allOf" || key == "anyOf" || key == "oneOf" || key == "prefixItems" ||
         key == "items";
}

bool is_schema_map_keyword(const std::string& key) {
  return key == "properties" || key == "patternProperties" || key == "definitions" ||
         key == "$defs" || key == "dependentSchemas" || key == "dependencies";
}

void check_depth(const Json& root) {
  // Iterative, so that the check itself cannot overflow the stack.
  std::vector<std::pair<const Json*, int>> stack{{&root, 0}};
  while (!stack.empty()) {
    auto [json, depth] = stack.back();
    stack.pop_back();
    if (depth > SchemaDocument::kMaxDepth) {
      refuse("JSON Schema: the schema nests deeper than " +
             std::to_string(SchemaDocument::kMaxDepth) + " levels");
    }
    if (json->is_structured()) {
      for (const Json& child : *json) stack.emplace_back(&child, depth + 1);
    }
  }
}

Draft draft_of(const Json& root) {
  if (!root.is_object()) return Draft::kUnspecified;
  auto it = root.find("$schema");
  if (it == root.end() || !it->is_string()) return Draft::kUnspecified;
  const std::string& uri = it->get_ref<const std::string&>();
  if (uri.find("draft-03") != std::string::npos || uri.find("draft-02") != std::string::npos ||
      uri.find("draft-01") != std::string::npos) {
    refuse("JSON Schema: '$schema' " + uri + " is not supported (draft 4 and later are)");
  }
  if (uri.find("draft-04") != std::string::npos) return Draft::k4;
  if (uri.find("draft-06") != std::string::npos) return Draft::k6;
  if (uri.find("draft-07") != std::string::npos) return Draft::k7;
  if (uri.find("2019-09") != std::string::npos) return Draft::k2019;
  if (uri.find("2020-12") != std::string::npos) return Draft::k2020;
  return Draft::kUnspecified;
}

}  // namespace

std::string resolve_uri(const std::string& base_text, const std::string& reference) {
  const Uri base = parse_uri(base_text);
  const Uri ref = parse_uri(reference);
  Uri target;
  if (ref.scheme) {
    target = ref;
    target.path = remove_dot_segments(ref.path);
  } else {
    if (ref.authority) {
      target.authority = ref.authority;
      target.path = remove_dot_segments(ref.path);
      target.query = ref.query;
    } else {
      if (ref.path.empty()) {
        target.path = base.path;
        target.query = ref.query ? ref.query : base.query;
      } else {
        if (ref.path[0] == '/') {
          target.path = remove_dot_segments(ref.path);
        } else {
          std::string merged;
          if (base.authority && base.path.empty()) {
            merged = "/" + ref.path;
          } else {
            const size_t slash = base.path.rfind('/');
            merged = (slash == std::string::npos ? "" : base.path.substr(0, slash + 1)) + ref.path;
          }
          target.path = remove_dot_segments(merged);
        }
        target.query = ref.query;
      }
      target.authority = base.authority;
    }
    target.scheme = base.scheme;
  }
  target.fragment = ref.fragment;
  return compose(target);
}

SchemaDocument::SchemaDocument(const Json& root, CompileBudget& budget) : budget_(budget) {
  check_depth(root);
  draft_ = draft_of(root);
  index(root, "", "", 0);
  root_ = by_address_.at(&root);
  resources_.emplace(root_->base, root_);
  resources_.emplace("", root_);  // fragment-only references in a document without an id
}

std::string SchemaDocument::identifier_of(const Json& json) const {
  const char* key = draft_ == Draft::k4 ? "id" : "$id";
  auto it = json.find(key);
  if (it == json.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

const SchemaNode* SchemaDocument::intern(const Json& json, std::string pointer, std::string base) {
  auto it = by_address_.find(&json);
  if (it != by_address_.end()) return it->second;
  budget_.charge(1, "JSON Schema nodes");
  nodes_.push_back(SchemaNode{&json, nodes_.size(), std::move(pointer), std::move(base)});
  by_address_.emplace(&json, &nodes_.back());
  return &nodes_.back();
}

void SchemaDocument::index(const Json& json, const std::string& pointer, const std::string& base_in,
                           int depth) {
  std::string base = base_in;
  bool opens_resource = false;
  std::string anchor_uri;  // "uri#name" when the identifier is (or ends in) a plain name
  if (json.is_object()) {
    const std::string id = identifier_of(json);
    if (!id.empty()) {
      const std::string resolved = resolve_uri(base_in, id);
      const size_t hash = resolved.find('#');
      const std::string resource = resolved.substr(0, hash);
      const std::string fragment = hash == std::string::npos ? "" : resolved.substr(hash + 1);
      if (id[0] != '#') base = resource, opens_resource = true;
      if (!fragment.empty() && fragment[0] != '/') anchor_uri = resource + "#" + fragment;
    }
  }
  const SchemaNode* node = intern(json, pointer, base);
  if (!json.is_object()) return;
  if (opens_resource) resources_.emplace(base, node);
  if (!anchor_uri.empty()) anchors_[anchor_uri] = node;
  auto anchor = json.find("$anchor");
  if (anchor != json.end() && anchor->is_string()) {
    anchors_[base + "#" + anchor->get<std::string>()] = node;
  }
  if (depth >= kMaxDepth) return;
  for (auto it = json.begin(); it != json.end(); ++it) {
    const std::string& key = it.key();
    const Json& value = it.value();
    const std::string path = pointer + "/" + escape_pointer_token(key);
    if (key == "enum" || key == "const" || key == "default" || key == "examples") continue;
    if (is_schema_map_keyword(key) && value.is_object()) {
      for (auto entry = value.begin(); entry != value.end(); ++entry) {
        if (entry.value().is_object() || entry.value().is_boolean()) {
          index(entry.value(), path + "/" + escape_pointer_token(entry.key()), base, depth + 2);
        }
      }
    } else if (is_schema_array_keyword(key) && value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        index(value[i], path + "/" + std::to_string(i), base, depth + 2);
      }
    } else if (is_single_schema_keyword(key) && (value.is_object() || value.is_boolean())) {
      index(value, path, base, depth + 1);
    }
  }
}

const SchemaNode* SchemaDocument::child(const SchemaNode& parent, const Json& json,
                                        std::string_view path) {
  return intern(json, parent.pointer + std::string(path), parent.base);
}

const SchemaNode* SchemaDocument::resolve(const SchemaNode& from, const std::string& ref) {
  const std::string where = shown_pointer(from.pointer + "/$ref");
  const std::string resolved = resolve_uri(from.base, ref);
  const size_t hash = resolved.find('#');
  const std::string resource = resolved.substr(0, hash);
  const std::string fragment =
      hash == std::string::npos ? "" : percent_decode(resolved.substr(hash + 1));
  auto found = resources_.find(resource);
  if (found == resources_.end()) {
    refuse("JSON Schema: '$ref' " + ref + " at " + where +
           " points outside the schema document (only references inside it are supported)");
  }
  const SchemaNode* target = found->second;
  if (fragment.empty()) return target;
  if (fragment[0] != '/') {
    auto anchor = anchors_.find(resource + "#" + fragment);
    if (anchor == anchors_.end() || anchor->second == nullptr) {
      refuse("JSON Schema: '$ref' " + ref + " at " + where + " names no anchor of the document");
    }
    return anchor->second;
  }
  // A JSON pointer into the resource; the base of what it reaches is that of the nearest
  // indexed node on the way.
  const Json* json = target->json;
  std::string base = target->base;
  size_t pos = 1;
  while (pos <= fragment.size()) {
    const size_t end = std::min(fragment.find('/', pos), fragment.size());
    std::string token;
    for (size_t i = pos; i < end; ++i) {
      if (fragment[i] == '~' && i + 1 < end && (fragment[i + 1] == '0' || fragment[i + 1] == '1')) {
        token.push_back(fragment[i + 1] == '0' ? '~' : '/');
        ++i;
      } else {
        token.push_back(fragment[i]);
      }
    }
    pos = end + 1;
    const Json* next = nullptr;
    if (json->is_object()) {
      auto it = json->find(token);
      if (it != json->end()) next = &*it;
    } else if (json->is_array() && !token.empty() && token.size() < 10 &&
               token.find_first_not_of("0123456789") == std::string::npos &&
               (token == "0" || token[0] != '0')) {
      const size_t index = std::stoul(token);
      if (index < json->size()) next = &(*json)[index];
    }
    if (next == nullptr) {
      refuse("JSON Schema: '$ref' " + ref + " at " + where + " points to nothing");
    }
    json = next;
    auto known = by_address_.find(json);
    if (known != by_address_.end()) base = known->second->base;
  }
  return intern(*json, target->pointer + fragment, base);
}

}  // namespace llms::structured::jsonschema
