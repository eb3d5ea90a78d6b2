// cli/hf_input: see the header.
#include "hf_input.h"

#include <fmt/core.h>

#include <chrono>

#include "gguf/gguf_writer.h"
#include "gguf/hf_model_dir.h"
#include "model/hf_conversion.h"
#include "util/byte_size.h"
#include "util/error.h"

namespace llms::cli {

HfInput::HfInput(const std::filesystem::path& dir, const std::filesystem::path& output) {
  const auto start = std::chrono::steady_clock::now();
  std::filesystem::path out_dir = output.parent_path();
  if (out_dir.empty()) out_dir = ".";
  if (!std::filesystem::is_directory(out_dir)) {
    throw Error(Error::Kind::kInvalidArgument,
                "the output's directory " + out_dir.string() + " does not exist");
  }
  const gguf::HfModelDir hf = gguf::HfModelDir::open(dir);
  gguf::GgufWriter writer;
  const model::HfConversionReport report = model::add_hf_model(hf, writer);
  bytes_ = report.file_bytes;
  const std::filesystem::path path = out_dir / ("." + output.filename().string() + ".from-hf.gguf");
  // One left by a run that was killed (a signal skips the destructor) is ours: replaced, and its
  // space counted as free.
  std::error_code ec;
  std::filesystem::remove(path, ec);
  const uint64_t free_bytes = std::filesystem::space(out_dir).available;
  if (free_bytes < bytes_) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("converting {} needs {} of free space in {} for the intermediate "
                            "GGUF file; {} is free",
                            dir.string(), format_bytes(bytes_), out_dir.string(),
                            format_bytes(free_bytes)));
  }
  writer.write(path);
  gguf_ = path;
  try {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr,
               "[convert] {} ({}, {} tensors, {} q/k permuted) -> {} ({}) in {:.1f} s; removed "
               "when done\n",
               dir.string(), report.architecture, report.n_tensors, report.n_permuted,
               gguf_.string(), format_bytes(bytes_), seconds);
  } catch (...) {
    std::filesystem::remove(gguf_, ec);  // the destructor of a half-built object does not run
    throw;
  }
}

HfInput::~HfInput() {
  std::error_code ec;
  if (!gguf_.empty()) std::filesystem::remove(gguf_, ec);
}

}  // namespace llms::cli
