// structured/json_schema_keywords: reading keyword values, shared by normalizing and negating.
//
// Each reader checks the value's JSON type and range and refuses a malformed schema with
// llms::Error(kInvalidArgument) naming the keyword and where it is.
#pragma once

#include <cstdint>
#include <string>

#include "structured/json_schema_numbers.h"
#include "structured/json_schema_shape.h"

namespace llms::structured::jsonschema {

// Keywords that only annotate (or hold definitions): no effect on validity.
bool is_annotation_keyword(const std::string& key);

// Keywords that constrain values (every other name annotates or means nothing).
bool is_constraining_keyword(const std::string& key);

// A schema object with no constraining keyword: it accepts every value, like `true`.
bool is_unconstrained(const Json& schema);

// The type bits of `type` (a name or an array of names).
uint8_t parse_type(const Json& value, const std::string& pointer);

// A non-negative integer count (5 or 5.0), saturated far above any supported bound.
int64_t parse_count(const std::string& key, const Json& value, const std::string& pointer);

// A numeric bound.
NumberBound parse_bound(const std::string& key, const Json& value, bool exclusive,
                        const std::string& pointer);

[[noreturn]] void refuse_keyword_value(const std::string& key, const std::string& pointer,
                                       const std::string& what);

}  // namespace llms::structured::jsonschema
