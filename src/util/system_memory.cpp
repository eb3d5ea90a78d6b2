// util/system_memory: see system_memory.h.
#include "util/system_memory.h"

#include <fstream>
#include <string>

namespace llms {

int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

}  // namespace llms
