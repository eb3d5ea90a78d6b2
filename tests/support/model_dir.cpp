#include "model_dir.h"

#include <cstdlib>

namespace llms::testing {

std::filesystem::path model_dir() {
  if (const char* dir = std::getenv("LLMS_MODEL_DIR"); dir && *dir) return dir;
  if (const char* cache = std::getenv("LLMSERVE_CACHE"); cache && *cache) {
    return std::filesystem::path(cache) / "models";
  }
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/tmp") / ".cache" / "llmserve" / "models";
}

}  // namespace llms::testing
