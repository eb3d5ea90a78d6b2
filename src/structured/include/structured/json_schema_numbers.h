// structured/json_schema_numbers: exact decimal bounds and the regexes of numbers within them.
//
// Internal to the JSON Schema compiler (public only for its tests). Bounds are exact decimals
// (the shortest text of the schema's double, which is what its author wrote), compared exactly;
// so are the numbers the regexes admit. Integers are written `0|-?[1-9][0-9]*`; a bounded number
// `-?(0|[1-9][0-9]*)(\.[0-9]+)?` (no exponent, never "-0"); an unbounded one in full JSON syntax.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "structured/compile_budget.h"

namespace llms::structured::jsonschema {

// An exact decimal: sign, integer digits without leading zeros ("0" for zero), fraction digits
// without trailing zeros. Zero is never negative.
struct Decimal {
  bool negative = false;
  std::string integer = "0";
  std::string fraction;

  bool is_zero() const { return integer == "0" && fraction.empty(); }
  bool is_integer() const { return fraction.empty(); }
  Decimal negated() const;
  std::string to_string() const;
  bool operator==(const Decimal& other) const = default;
};

// Parses a JSON number text ("-1.50e+3"); nullopt when it is not one, or when its exponent would
// need more than `max_digits` digits.
std::optional<Decimal> parse_decimal(const std::string& text, size_t max_digits = 400);
// The value of a JSON number (integers exactly; doubles by their shortest round-trip text).
std::optional<Decimal> decimal_of(const nlohmann::ordered_json& number);
int compare(const Decimal& a, const Decimal& b);

// The smallest integer >= value and the largest <= value.
Decimal ceil_decimal(const Decimal& value);
Decimal floor_decimal(const Decimal& value);
Decimal add_one(const Decimal& integer);       // integer + 1
Decimal subtract_one(const Decimal& integer);  // integer - 1

struct NumberBound {
  Decimal value;
  bool exclusive = false;
};

// Regex of the integers within the bounds (each optional); nullopt when there is none.
std::optional<std::string> integer_range_regex(const std::optional<NumberBound>& lower,
                                               const std::optional<NumberBound>& upper,
                                               CompileBudget& budget);

// Regex of the numbers (integral or not) within the bounds, at least one of which is given;
// nullopt when there is none.
std::optional<std::string> number_range_regex(const std::optional<NumberBound>& lower,
                                              const std::optional<NumberBound>& upper,
                                              CompileBudget& budget);

inline constexpr const char* kAnyIntegerRegex = "(?:0|-?[1-9][0-9]*)";
inline constexpr const char* kAnyNumberRegex =
    "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+\\-]?[0-9]+)?";

}  // namespace llms::structured::jsonschema
