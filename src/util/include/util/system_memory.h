// util/system_memory: how much memory the system can give without swapping: MemAvailable from
// /proc/meminfo, in bytes, or 0 when unknown (no /proc, or a kernel without that line).
#pragma once

#include <cstdint>

namespace llms {

int64_t available_memory_bytes();

}  // namespace llms
