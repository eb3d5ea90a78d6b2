// cli/hf_input: a Hugging Face model directory given where a command reads a GGUF file
// (`quantize DIR OUT`): converted (model/hf_conversion.h) into a GGUF file beside the output,
// which the command then reads like any other, and removed when the command ends, done or not.
//
// The temporary file holds the directory's weights in their stored types (F16/BF16/F32), so it
// takes about the directory's size; the constructor refuses (llms::Error kInvalidArgument, both
// sizes named) when the output's directory has less free space than it, and leaves nothing
// behind on any refusal (GgufWriter::write writes under a temporary name and renames). A process
// killed by a signal leaves the hidden file; the next conversion to the same OUT replaces it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace llms::cli {

class HfInput {
 public:
  // `dir`: the Hugging Face directory; `output`: the file the command will write (the temporary
  // GGUF goes into its directory as ".<output name>.from-hf.gguf").
  HfInput(const std::filesystem::path& dir, const std::filesystem::path& output);
  ~HfInput();
  HfInput(const HfInput&) = delete;
  HfInput& operator=(const HfInput&) = delete;

  const std::filesystem::path& gguf() const { return gguf_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::filesystem::path gguf_;
  uint64_t bytes_ = 0;
};

}  // namespace llms::cli
