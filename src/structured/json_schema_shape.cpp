// structured/json_schema_shape: see json_schema_shape.h.
#include "structured/json_schema_shape.h"

#include <algorithm>

namespace llms::structured::jsonschema {

namespace {

// Document order, so that the order of meets (and so of properties) never depends on addresses.
bool before(const SchemaNode* a, const SchemaNode* b) { return a->index < b->index; }

}  // namespace

SchemaSet SchemaSet::meet(const SchemaSet& other) const {
  if (never || other.never) return none();
  SchemaSet out;
  std::set_union(nodes.begin(), nodes.end(), other.nodes.begin(), other.nodes.end(),
                 std::back_inserter(out.nodes), before);
  std::set_union(negated.begin(), negated.end(), other.negated.begin(), other.negated.end(),
                 std::back_inserter(out.negated), before);
  return out;
}

bool SchemaSet::operator<(const SchemaSet& other) const {
  if (never != other.never) return never < other.never;
  if (nodes != other.nodes) {
    return std::lexicographical_compare(nodes.begin(), nodes.end(), other.nodes.begin(),
                                        other.nodes.end(), before);
  }
  return std::lexicographical_compare(negated.begin(), negated.end(), other.negated.begin(),
                                      other.negated.end(), before);
}

uint8_t json_type_of(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return kNullType;
    case Json::value_t::boolean:
      return kBooleanType;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return kIntegerType;
    case Json::value_t::number_float: {
      auto decimal = decimal_of(value);
      return decimal && decimal->is_integer() ? kIntegerType : kFractionType;
    }
    case Json::value_t::string:
      return kStringType;
    case Json::value_t::array:
      return kArrayType;
    case Json::value_t::object:
      return kObjectType;
    default:
      return 0;
  }
}

bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    auto x = decimal_of(a), y = decimal_of(b);
    return x && y && *x == *y;
  }
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end() || !json_equal(it.value(), *other)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!json_equal(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace llms::structured::jsonschema
