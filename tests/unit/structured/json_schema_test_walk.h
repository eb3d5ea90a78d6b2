// Helpers of the JSON Schema compiler's tests: compile a schema, walk texts through the grammar
// engine byte by byte, and write an instance with its keys in the order the compiler emits them.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "structured/grammar.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"
#include "structured/vocabulary.h"

namespace llms::structured::testing {

using Json = nlohmann::ordered_json;

// A vocabulary of the 256 single bytes: walking it is walking the text.
inline std::shared_ptr<const TokenIndex> byte_index() {
  static const std::shared_ptr<const TokenIndex> index = [] {
    Vocabulary vocabulary;
    for (int b = 0; b < 256; ++b) {
      vocabulary.token_bytes.push_back(std::string(1, static_cast<char>(b)));
      vocabulary.is_special.push_back(0);
    }
    return build_token_index(std::move(vocabulary));
  }();
  return index;
}

// A schema compiled into grammar text and then into the engine's automaton.
struct CompiledSchema {
  std::string text;
  std::shared_ptr<const CompiledGrammar> grammar;

  // True when `instance_text` is a complete sentence of the grammar.
  bool accepts(const std::string& instance_text) const {
    Matcher matcher(grammar);
    return matcher.accept_bytes(instance_text) && matcher.is_accepting();
  }
};

inline CompiledSchema compile_schema(const Json& schema, const JsonSchemaOptions& options = {}) {
  CompileBudget budget;
  CompiledSchema out;
  out.text = json_schema_to_grammar(schema, options, budget);
  out.grammar =
      compile_grammar(out.text, byte_index(), CompileLimits{std::chrono::seconds(20), 20'000'000});
  return out;
}

inline JsonSchemaOptions compact_options() {
  JsonSchemaOptions options;
  options.whitespace = JsonSchemaOptions::Whitespace::kCompact;
  return options;
}

namespace detail {

inline const Json* resolve_local_ref(const Json& root, const std::string& ref) {
  if (ref.empty() || ref[0] != '#') return nullptr;
  try {
    const std::string pointer = ref.substr(1);
    if (pointer.empty()) return &root;
    const Json::json_pointer p(pointer);
    return root.contains(p) ? &root.at(p) : nullptr;
  } catch (...) {
    return nullptr;
  }
}

// Collects, in the compiler's merge order, the subschemas that apply at one place.
inline void collect(const Json& root, const Json* schema, std::vector<const Json*>& out,
                    int depth) {
  if (schema == nullptr || !schema->is_object() || depth > 24) return;
  out.push_back(schema);
  for (auto it = schema->begin(); it != schema->end(); ++it) {
    if ((it.key() == "allOf" || it.key() == "anyOf") && it.value().is_array()) {
      for (const Json& branch : it.value()) collect(root, &branch, out, depth + 1);
    } else if (it.key() == "$ref" && it.value().is_string()) {
      collect(root, resolve_local_ref(root, it.value().get<std::string>()), out, depth + 1);
    }
  }
  auto one_of = schema->find("oneOf");
  if (one_of != schema->end() && one_of->is_array()) {
    for (const Json& branch : *one_of) collect(root, &branch, out, depth + 1);
  }
}

inline Json reorder(const Json& root, const Json& instance, const std::vector<const Json*>& here,
                    int depth) {
  std::vector<const Json*> schemas;
  for (const Json* s : here) collect(root, s, schemas, depth);
  if (instance.is_object()) {
    std::vector<std::string> order;
    for (const Json* s : schemas) {
      auto properties = s->find("properties");
      if (properties == s->end() || !properties->is_object()) continue;
      for (auto it = properties->begin(); it != properties->end(); ++it) {
        if (std::find(order.begin(), order.end(), it.key()) == order.end())
          order.push_back(it.key());
      }
    }
    for (auto it = instance.begin(); it != instance.end(); ++it) {
      if (std::find(order.begin(), order.end(), it.key()) == order.end()) order.push_back(it.key());
    }
    Json out = Json::object();
    for (const std::string& key : order) {
      if (!instance.contains(key)) continue;
      std::vector<const Json*> children;
      for (const Json* s : schemas) {
        auto properties = s->find("properties");
        if (properties != s->end() && properties->is_object() && properties->contains(key)) {
          children.push_back(&(*properties)[key]);
        }
        auto additional = s->find("additionalProperties");
        if (additional != s->end() && additional->is_object()) children.push_back(&*additional);
        auto patterns = s->find("patternProperties");
        if (patterns != s->end() && patterns->is_object()) {
          for (const Json& p : *patterns) children.push_back(&p);
        }
      }
      out[key] = reorder(root, instance[key], children, depth + 1);
    }
    return out;
  }
  if (instance.is_array()) {
    Json out = Json::array();
    for (size_t i = 0; i < instance.size(); ++i) {
      std::vector<const Json*> children;
      for (const Json* s : schemas) {
        for (const char* key : {"items", "prefixItems", "additionalItems"}) {
          auto items = s->find(key);
          if (items == s->end()) continue;
          if (items->is_object()) children.push_back(&*items);
          if (items->is_array() && i < items->size()) children.push_back(&(*items)[i]);
        }
      }
      out.push_back(reorder(root, instance[i], children, depth + 1));
    }
    return out;
  }
  return instance;
}

}  // namespace detail

// `instance` with each object's keys in the order of the `properties` that apply to it (then the
// others in their own order), as the compiled grammar writes them.
inline Json order_keys_like_schema(const Json& schema, const Json& instance) {
  return detail::reorder(schema, instance, {&schema}, 0);
}

}  // namespace llms::structured::testing
