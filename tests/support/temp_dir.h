// tests/support/temp_dir: a scratch directory removed when the test ends.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <cstdint>

namespace llms::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // Writes bytes to a file under this directory and returns its path.
  std::filesystem::path write(const std::string& name, std::span<const uint8_t> bytes) const;
  std::filesystem::path write(const std::string& name, std::string_view text) const;

 private:
  std::filesystem::path path_;
};

}  // namespace llms::testing
