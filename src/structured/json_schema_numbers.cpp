// structured/json_schema_numbers: see json_schema_numbers.h.
#include "structured/json_schema_numbers.h"

#include <algorithm>
#include <vector>

namespace llms::structured::jsonschema {

Decimal Decimal::negated() const {
  Decimal out = *this;
  if (!out.is_zero()) out.negative = !out.negative;
  return out;
}

std::string Decimal::to_string() const {
  std::string out = negative ? "-" : "";
  out += integer;
  if (!fraction.empty()) out += "." + fraction;
  return out;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

void normalize(Decimal& d) {
  const size_t first = d.integer.find_first_not_of('0');
  d.integer = first == std::string::npos ? "0" : d.integer.substr(first);
  const size_t last = d.fraction.find_last_not_of('0');
  d.fraction = last == std::string::npos ? "" : d.fraction.substr(0, last + 1);
  if (d.is_zero()) d.negative = false;
}

}  // namespace

std::optional<Decimal> parse_decimal(const std::string& text, size_t max_digits) {
  size_t pos = 0;
  Decimal d;
  if (pos < text.size() && text[pos] == '-') d.negative = true, ++pos;
  const size_t int_start = pos;
  while (pos < text.size() && is_digit(text[pos])) ++pos;
  if (pos == int_start) return std::nullopt;
  std::string digits = text.substr(int_start, pos - int_start);
  int64_t point = static_cast<int64_t>(digits.size());  // digits before the decimal point
  if (pos < text.size() && text[pos] == '.') {
    const size_t frac_start = ++pos;
    while (pos < text.size() && is_digit(text[pos])) ++pos;
    if (pos == frac_start) return std::nullopt;
    digits += text.substr(frac_start, pos - frac_start);
  }
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    ++pos;
    bool exp_negative = false;
    if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
      exp_negative = text[pos] == '-';
      ++pos;
    }
    const size_t exp_start = pos;
    int64_t exponent = 0;
    while (pos < text.size() && is_digit(text[pos])) {
      exponent = exponent * 10 + (text[pos] - '0');
      if (exponent > static_cast<int64_t>(max_digits)) return std::nullopt;
      ++pos;
    }
    if (pos == exp_start) return std::nullopt;
    point += exp_negative ? -exponent : exponent;
  }
  if (pos != text.size()) return std::nullopt;
  // Place the decimal point `point` digits into `digits`, padding with zeros either side.
  if (point <= 0) {
    digits.insert(0, static_cast<size_t>(-point) + 1, '0');
    point = 1;
  }
  if (point > static_cast<int64_t>(digits.size())) {
    digits.append(static_cast<size_t>(point) - digits.size(), '0');
  }
  if (digits.size() > 2 * max_digits) return std::nullopt;
  d.integer = digits.substr(0, static_cast<size_t>(point));
  d.fraction = digits.substr(static_cast<size_t>(point));
  normalize(d);
  return d;
}

std::optional<Decimal> decimal_of(const nlohmann::ordered_json& number) {
  if (number.is_number_unsigned()) {
    return parse_decimal(std::to_string(number.get<uint64_t>()));
  }
  if (number.is_number_integer()) return parse_decimal(std::to_string(number.get<int64_t>()));
  if (number.is_number_float()) return parse_decimal(number.dump());  // shortest round trip
  return std::nullopt;
}

namespace {

int compare_magnitude(const Decimal& a, const Decimal& b) {
  if (a.integer.size() != b.integer.size()) return a.integer.size() < b.integer.size() ? -1 : 1;
  if (int c = a.integer.compare(b.integer); c != 0) return c < 0 ? -1 : 1;
  if (int c = a.fraction.compare(b.fraction); c != 0) return c < 0 ? -1 : 1;
  return 0;
}

// Digit-string increment and decrement of a non-negative integer.
std::string increment(std::string digits) {
  for (size_t i = digits.size(); i-- > 0;) {
    if (digits[i] != '9') {
      ++digits[i];
      return digits;
    }
    digits[i] = '0';
  }
  return "1" + digits;
}

std::string decrement(std::string digits) {  // digits > 0
  for (size_t i = digits.size(); i-- > 0;) {
    if (digits[i] != '0') {
      --digits[i];
      break;
    }
    digits[i] = '9';
  }
  const size_t first = digits.find_first_not_of('0');
  return first == std::string::npos ? "0" : digits.substr(first);
}

}  // namespace

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int magnitude = compare_magnitude(a, b);
  return a.negative ? -magnitude : magnitude;
}

Decimal add_one(const Decimal& value) {
  Decimal out;
  if (!value.negative) {
    out.integer = increment(value.integer);
  } else {
    out.integer = decrement(value.integer);
    out.negative = out.integer != "0";
  }
  return out;
}

Decimal subtract_one(const Decimal& value) {
  Decimal out;
  if (value.negative || value.is_zero()) {
    out.integer = increment(value.integer);
    out.negative = true;
  } else {
    out.integer = decrement(value.integer);
  }
  return out;
}

Decimal floor_decimal(const Decimal& value) {
  Decimal truncated{value.negative, value.integer, ""};
  normalize(truncated);
  if (value.is_integer() || !value.negative) return truncated;
  return subtract_one(truncated);
}

Decimal ceil_decimal(const Decimal& value) {
  Decimal truncated{value.negative, value.integer, ""};
  normalize(truncated);
  if (value.is_integer() || value.negative) return truncated;
  return add_one(truncated);
}

namespace {

std::string digit_class(int lo, int hi) {
  if (lo == hi) return std::string(1, static_cast<char>('0' + lo));
  if (lo == 0 && hi == 9) return "[0-9]";
  return "[" + std::string(1, static_cast<char>('0' + lo)) + "-" +
         std::string(1, static_cast<char>('0' + hi)) + "]";
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

std::string join(const std::vector<std::string>& alternatives) {
  if (alternatives.size() == 1) return alternatives[0];
  std::string out = "(?:";
  for (size_t i = 0; i < alternatives.size(); ++i) {
    if (i) out += "|";
    out += alternatives[i];
  }
  return out + ")";
}

bool all_of(const std::string& s, size_t from, char c) {
  return s.find_first_not_of(c, from) == std::string::npos;
}

// Digit strings of s.size() digits that are >= s (lexicographically = numerically).
std::string at_least(const std::string& s, size_t from, CompileBudget& budget) {
  budget.charge(1, "number range alternatives");
  const size_t n = s.size() - from;
  if (n == 0) return "";
  if (all_of(s, from, '0')) return any_digits(n);
  const int d = s[from] - '0';
  std::vector<std::string> alternatives{std::string(1, s[from]) + at_least(s, from + 1, budget)};
  if (d < 9) alternatives.push_back(digit_class(d + 1, 9) + any_digits(n - 1));
  return join(alternatives);
}

std::string at_most(const std::string& s, size_t from, CompileBudget& budget) {
  budget.charge(1, "number range alternatives");
  const size_t n = s.size() - from;
  if (n == 0) return "";
  if (all_of(s, from, '9')) return any_digits(n);
  const int d = s[from] - '0';
  std::vector<std::string> alternatives{std::string(1, s[from]) + at_most(s, from + 1, budget)};
  if (d > 0) alternatives.push_back(digit_class(0, d - 1) + any_digits(n - 1));
  return join(alternatives);
}

// Digit strings of equal length between lo and hi (lo <= hi, same size).
void same_length_range(const std::string& lo, const std::string& hi, std::vector<std::string>& out,
                       CompileBudget& budget) {
  budget.charge(1, "number range alternatives");
  size_t i = 0;
  while (i < lo.size() && lo[i] == hi[i]) ++i;
  const std::string prefix = lo.substr(0, i);
  if (i == lo.size()) {
    out.push_back(prefix);
    return;
  }
  const size_t n = lo.size() - i - 1;
  const int a = lo[i] - '0', b = hi[i] - '0';
  const bool lo_open = all_of(lo, i + 1, '0'), hi_open = all_of(hi, i + 1, '9');
  int middle_first = a + 1, middle_last = b - 1;
  if (lo_open) {
    middle_first = a;
  } else {
    out.push_back(prefix + lo[i] + at_least(lo, i + 1, budget));
  }
  if (hi_open) middle_last = b;
  if (middle_first <= middle_last) {
    out.push_back(prefix + digit_class(middle_first, middle_last) + any_digits(n));
  }
  if (!hi_open) out.push_back(prefix + hi[i] + at_most(hi, i + 1, budget));
}

// Non-negative integers (no leading zeros) from lo to hi (hi nullopt: no bound).
std::string nonnegative_range(const std::string& lo, const std::optional<std::string>& hi,
                              CompileBudget& budget) {
  std::vector<std::string> out;
  const size_t lo_len = lo.size();
  auto smallest = [](size_t len) {
    return len == 1 ? std::string("0") : "1" + std::string(len - 1, '0');
  };
  auto largest = [](size_t len) { return std::string(len, '9'); };
  if (hi && hi->size() == lo_len) {
    same_length_range(lo, *hi, out, budget);
    return join(out);
  }
  same_length_range(lo, largest(lo_len), out, budget);
  if (!hi) {
    out.push_back("[1-9][0-9]{" + std::to_string(lo_len) + ",}");
    return join(out);
  }
  const size_t hi_len = hi->size();
  if (hi_len > lo_len + 1) {
    // Every length strictly between: [1-9] then lo_len .. hi_len-2 more digits.
    if (hi_len - 2 == lo_len) {
      out.push_back("[1-9][0-9]{" + std::to_string(lo_len) + "}");
    } else {
      out.push_back("[1-9][0-9]{" + std::to_string(lo_len) + "," + std::to_string(hi_len - 2) +
                    "}");
    }
  }
  same_length_range(smallest(hi_len), *hi, out, budget);
  return join(out);
}

}  // namespace

std::optional<std::string> integer_range_regex(const std::optional<NumberBound>& lower,
                                               const std::optional<NumberBound>& upper,
                                               CompileBudget& budget) {
  std::optional<Decimal> lo, hi;
  if (lower)
    lo = lower->exclusive ? add_one(floor_decimal(lower->value)) : ceil_decimal(lower->value);
  if (upper) {
    hi = upper->exclusive ? subtract_one(ceil_decimal(upper->value)) : floor_decimal(upper->value);
  }
  if (!lo && !hi) return std::string(kAnyIntegerRegex);
  if (lo && hi && compare(*lo, *hi) > 0) return std::nullopt;
  std::vector<std::string> parts;
  // Negative integers: magnitudes from |min(hi, -1)| up to |lo| (or without bound).
  if (!lo || lo->negative) {
    std::string smallest_magnitude = "1";
    if (hi && hi->negative) smallest_magnitude = hi->integer;
    std::optional<std::string> largest_magnitude;
    if (lo) largest_magnitude = lo->integer;
    parts.push_back("-" + nonnegative_range(smallest_magnitude, largest_magnitude, budget));
  }
  if (!hi || !hi->negative) {
    const std::string from = (lo && !lo->negative) ? lo->integer : "0";
    std::optional<std::string> to;
    if (hi) to = hi->integer;
    parts.push_back(nonnegative_range(from, to, budget));
  }
  return join(parts);
}

namespace {

// A bound on a fraction's digits: the digits (no trailing zeros) and whether equality is allowed.
struct FractionBound {
  const std::string* digits;
  bool inclusive;
};

char digit_at(const std::string& s, size_t i) { return i < s.size() ? s[i] : '0'; }

// Digit strings d (nonempty when `need_digit`) such that 0.prefix d respects the bounds still
// tight at position i (a bound is tight while the digits so far equal its own).
std::optional<std::string> fraction_digits(const std::optional<FractionBound>& lo,
                                           const std::optional<FractionBound>& hi, size_t i,
                                           bool lo_tight, bool hi_tight, bool need_digit,
                                           CompileBudget& budget) {
  budget.charge(1, "number range alternatives");
  const std::string free = need_digit ? "[0-9]+" : "[0-9]*";
  if (!lo_tight && !hi_tight) return free;
  const bool lo_rest_zero = lo_tight && i >= lo->digits->size();
  const bool hi_rest_zero = hi_tight && i >= hi->digits->size();
  const bool beyond_lo = !lo_tight || lo_rest_zero, beyond_hi = !hi_tight || hi_rest_zero;
  if (beyond_lo && beyond_hi) {
    // Only zero digits keep a bound tight, so the remaining choices have closed forms.
    if (lo_tight && hi_tight) {
      if (!lo->inclusive || !hi->inclusive) return std::nullopt;
      return std::string(need_digit ? "0+" : "0*");
    }
    if (lo_tight) return lo->inclusive ? free : std::string("0*[1-9][0-9]*");
    if (!hi->inclusive) return std::nullopt;
    return std::string(need_digit ? "0+" : "0*");
  }
  std::vector<std::string> alternatives;
  bool end_ok = !need_digit;
  if (lo_tight) end_ok = end_ok && lo_rest_zero && lo->inclusive;
  if (hi_tight && hi_rest_zero) end_ok = end_ok && hi->inclusive;
  const int lo_digit = lo_tight ? digit_at(*lo->digits, i) - '0' : 0;
  const int hi_digit = hi_tight ? digit_at(*hi->digits, i) - '0' : 9;
  // Digits in [lo_digit, hi_digit], grouped by which bounds stay tight after them.
  int d = lo_digit;
  while (d <= hi_digit) {
    const bool next_lo = lo_tight && d == lo_digit;
    const bool next_hi = hi_tight && d == hi_digit;
    int last = d;
    if (!next_lo && !next_hi) last = hi_tight ? hi_digit - 1 : 9;
    auto rest = fraction_digits(lo, hi, i + 1, next_lo, next_hi, false, budget);
    if (rest) alternatives.push_back(digit_class(d, last) + *rest);
    d = last + 1;
  }
  if (alternatives.empty()) {
    if (end_ok) return std::string();
    return std::nullopt;
  }
  std::string body = join(alternatives);
  if (alternatives.size() == 1 && body.size() > 1) body = "(?:" + body + ")";
  return end_ok ? body + "?" : body;
}

// The optional fraction "(\.digits)?" of numbers whose integer part is fixed, bounded by the
// fraction bounds (value 0.f compared with 0.lo and 0.hi).
std::optional<std::string> fraction_part(const std::optional<FractionBound>& lo,
                                         const std::optional<FractionBound>& hi,
                                         CompileBudget& budget) {
  // Without a fraction the value is .0: allowed if .0 >= lo and .0 <= hi.
  bool none_ok = true;
  if (lo && (!lo->digits->empty() || !lo->inclusive)) none_ok = false;
  if (hi && hi->digits->empty() && !hi->inclusive) none_ok = false;
  auto digits = fraction_digits(lo, hi, 0, lo.has_value(), hi.has_value(), true, budget);
  if (!digits) {
    if (none_ok) return std::string();
    return std::nullopt;
  }
  std::string out = "(?:\\." + *digits + ")";
  if (none_ok) out += "?";
  return out;
}

// Magnitudes "I(\.F)?" with lower <= value <= upper (each inclusive or not); lower >= 0.
std::optional<std::string> magnitude_range(const NumberBound& lower,
                                           const std::optional<NumberBound>& upper,
                                           CompileBudget& budget) {
  const std::string any_fraction = "(?:\\.[0-9]+)?";
  const Decimal& lo = lower.value;
  std::vector<std::string> alternatives;
  const FractionBound lo_fraction{&lo.fraction, !lower.exclusive};
  if (upper && upper->value.integer == lo.integer) {
    const FractionBound hi_fraction{&upper->value.fraction, !upper->exclusive};
    auto fraction = fraction_part(lo_fraction, hi_fraction, budget);
    if (!fraction) return std::nullopt;
    return lo.integer + *fraction;
  }
  if (auto fraction = fraction_part(lo_fraction, std::nullopt, budget)) {
    alternatives.push_back(lo.integer + *fraction);
  }
  const std::string above = increment(lo.integer);
  if (!upper) {
    alternatives.push_back(nonnegative_range(above, std::nullopt, budget) + any_fraction);
    return join(alternatives);
  }
  const Decimal& hi = upper->value;
  if (hi.integer != above) {
    const std::string below = decrement(hi.integer);
    alternatives.push_back(nonnegative_range(above, below, budget) + any_fraction);
  }
  const FractionBound hi_fraction{&hi.fraction, !upper->exclusive};
  if (auto fraction = fraction_part(std::nullopt, hi_fraction, budget)) {
    alternatives.push_back(hi.integer + *fraction);
  }
  if (alternatives.empty()) return std::nullopt;
  return join(alternatives);
}

}  // namespace

std::optional<std::string> number_range_regex(const std::optional<NumberBound>& lower,
                                              const std::optional<NumberBound>& upper,
                                              CompileBudget& budget) {
  if (lower && upper) {
    const int order = compare(lower->value, upper->value);
    if (order > 0 || (order == 0 && (lower->exclusive || upper->exclusive))) return std::nullopt;
  }
  const Decimal zero;
  std::vector<std::string> parts;
  // Negative numbers: magnitudes above |upper| (or above 0) and below |lower| (if any).
  if (!lower || lower->value.negative) {
    NumberBound magnitude_lo{zero, true};  // above 0: never "-0"
    if (upper && upper->value.negative) magnitude_lo = {upper->value.negated(), upper->exclusive};
    std::optional<NumberBound> magnitude_hi;
    if (lower) magnitude_hi = NumberBound{lower->value.negated(), lower->exclusive};
    if (auto magnitudes = magnitude_range(magnitude_lo, magnitude_hi, budget)) {
      parts.push_back("-" + *magnitudes);
    }
  }
  // Non-negative numbers: from max(lower, 0) up to upper.
  if (!upper || !upper->value.negative) {
    NumberBound magnitude_lo{zero, false};
    if (lower && !lower->value.negative) magnitude_lo = *lower;
    const bool zero_excluded = upper && upper->value.is_zero() && upper->exclusive;
    if (!zero_excluded) {
      if (auto magnitudes = magnitude_range(magnitude_lo, upper, budget)) {
        parts.push_back(*magnitudes);
      }
    }
  }
  if (parts.empty()) return std::nullopt;
  return join(parts);
}

}  // namespace llms::structured::jsonschema
