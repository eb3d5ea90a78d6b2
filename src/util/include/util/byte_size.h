// util/byte_size: parse and print byte quantities ("24GiB", "512M", "1073741824").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace llms {

// Accepts an integer or decimal number with an optional unit: B, K/KB/KiB, M/MB/MiB, G/GB/GiB,
// T/TB/TiB (case-insensitive). Decimal units (KB, MB, ...) are powers of 1000; binary ones (K, KiB,
// M, MiB, ...) powers of 1024. std::nullopt for anything else, negative values or overflow.
std::optional<uint64_t> parse_byte_size(std::string_view text);

// "1.25 GiB", "448.0 MiB", "512 B".
std::string format_bytes(uint64_t bytes);

}  // namespace llms
