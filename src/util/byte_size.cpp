#include "util/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace llms {

namespace {

std::string lower(std::string_view s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<double> unit_multiplier(std::string_view unit) {
  std::string u = lower(unit);
  if (u.empty() || u == "b") return 1.0;
  const char* prefixes = "kmgt";
  for (int i = 0; i < 4; ++i) {
    std::string p(1, prefixes[i]);
    if (u == p || u == p + "ib") return std::pow(1024.0, i + 1);
    if (u == p + "b") return std::pow(1000.0, i + 1);
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  std::string number(text.substr(0, i));
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) return std::nullopt;
  std::string_view unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  auto mult = unit_multiplier(unit);
  if (!mult) return std::nullopt;
  double value = std::stod(number) * *mult;
  if (!(value >= 0) || value >= 18446744073709551615.0) return std::nullopt;
  return static_cast<uint64_t>(std::llround(value));
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  }
  return buf;
}

}  // namespace llms
