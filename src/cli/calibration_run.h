// cli/calibration_run: a model run over calibration text for the commands that learn from
// activations (`imatrix`, `quantize --method gptq`), as llama.cpp's llama-imatrix runs it: the
// whole text is tokenized (with BOS where the model adds one), cut into chunks of `ctx` tokens,
// and each chunk runs as a fresh sequence from position 0 with its first token replaced by BOS
// where the model adds one. The transformer's activation observer (model/transformer.h) sees
// every weight matmul's input. Every refusal (llms::Error kInvalidArgument) comes from the
// constructor, before the model runs; a progress line per chunk goes to stderr.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/cpu_runner.h"
#include "model/transformer.h"

namespace llms::cli {

struct CalibrationOptions {
  std::string text_file;  // UTF-8 text (the flag that names it: `text_flag`)
  std::string text_flag = "-f";
  int32_t ctx = 512;         // tokens per chunk
  int64_t chunks = 0;        // 0: every whole chunk of the text
  int64_t min_ctx = 16;      // refuse a smaller ctx
  bool logits_rows = false;  // run the output matmul over every row (imatrix --process-output)
  int threads = 1;
  std::string tag = "calibration";  // progress lines start with [tag]
};

class CalibrationRun {
 public:
  // Reads and tokenizes the text and sets the model up; refuses a ctx below min_ctx or above the
  // model's context, chunks < 0, an empty or non-UTF-8 text, or a text shorter than one chunk.
  CalibrationRun(const gguf::GgufFile& file, const std::string& model_label,
                 const CalibrationOptions& options);

  int64_t n_chunks() const { return n_chunks_; }
  int64_t n_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  const model::CpuRunner& runner() const { return *runner_; }

  // Runs every chunk with `observer` set on the transformer (removed afterwards).
  void run(const model::ActivationObserver& observer);

 private:
  CalibrationOptions options_;
  std::string model_label_;
  std::vector<int32_t> tokens_;
  int32_t bos_ = -1;
  int64_t n_chunks_ = 0;
  int32_t n_blocks_ = 0;
  std::unique_ptr<model::CpuRunner> runner_;
};

// Opens `model`, runs every chunk with `observer` set (a CalibrationRun labelled with the file's
// name) and closes it again; returns the number of chunks run.
int64_t run_calibration(const std::filesystem::path& model, const CalibrationOptions& options,
                        const model::ActivationObserver& observer);

}  // namespace llms::cli
