// structured/json_schema_document: a schema document's nodes, drafts and `$ref` resolution.
//
// Internal to the JSON Schema compiler (public only for its tests). The document is indexed once:
// every subschema gets a SchemaNode (its JSON, its JSON pointer for messages, the base URI its
// `$ref`s resolve against); `$id`/`id` open embedded resources and `$anchor` or plain-name `$id`s
// name locations. A `$ref` is resolved per RFC 3986 against the base, then its fragment as a JSON
// pointer or an anchor inside the resource found; a reference to anything outside the document
// is refused. Nodes are interned by address, so two references to one subschema are one node.
#pragma once

#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>

#include "structured/compile_budget.h"

namespace llms::structured::jsonschema {

// Which specification the document follows (its root `$schema`). kUnspecified applies the
// stricter reading wherever drafts differ, so it is sound for every draft.
enum class Draft { kUnspecified, k4, k6, k7, k2019, k2020 };

struct SchemaNode {
  const nlohmann::ordered_json* json = nullptr;
  size_t index = 0;     // interning order: a deterministic order for sets of nodes
  std::string pointer;  // "" for the root, "/properties/a" ...
  std::string base;     // base URI for the `$ref`s inside it
};

class SchemaDocument {
 public:
  // Indexes `root` (which must outlive this object). Throws llms::Error(kInvalidArgument) when the
  // document nests deeper than `kMaxDepth` or the budget runs out.
  SchemaDocument(const nlohmann::ordered_json& root, CompileBudget& budget);

  static constexpr int kMaxDepth = 200;

  Draft draft() const { return draft_; }
  const SchemaNode* root() const { return root_; }

  // The node of a subschema reached from `parent` through `path` (a JSON pointer suffix such as
  // "/properties/a"); `json` must lie inside the document.
  const SchemaNode* child(const SchemaNode& parent, const nlohmann::ordered_json& json,
                          std::string_view path);

  // The target of the `$ref` value `ref` found in `from`. Throws llms::Error(kInvalidArgument)
  // naming the reference and where it is when it cannot be resolved inside the document.
  const SchemaNode* resolve(const SchemaNode& from, const std::string& ref);

 private:
  void index(const nlohmann::ordered_json& json, const std::string& pointer,
             const std::string& base, int depth);
  const SchemaNode* intern(const nlohmann::ordered_json& json, std::string pointer,
                           std::string base);
  std::string identifier_of(const nlohmann::ordered_json& json) const;

  CompileBudget& budget_;
  Draft draft_ = Draft::kUnspecified;
  std::deque<SchemaNode> nodes_;
  std::unordered_map<const nlohmann::ordered_json*, const SchemaNode*> by_address_;
  std::unordered_map<std::string, const SchemaNode*> resources_;  // absolute URI -> node
  std::unordered_map<std::string, const SchemaNode*> anchors_;    // URI#name -> node
  const SchemaNode* root_ = nullptr;
};

// RFC 3986 section 5.2: `reference` resolved against `base` (both may be relative).
std::string resolve_uri(const std::string& base, const std::string& reference);

// A JSON pointer token escaped (~0, ~1) for use in messages and paths.
std::string escape_pointer_token(std::string_view token);

}  // namespace llms::structured::jsonschema
