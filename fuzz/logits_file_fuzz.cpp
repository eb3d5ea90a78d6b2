// libFuzzer target for the logits-file reader (`perplexity --kl-divergence-base FILE`): any input
// is refused with llms::Error or reads, row by row, exactly the rows its header promises.
// Seed: fuzz/corpus/logits_file_fuzz/ (a valid 1-window file of a 3-token vocabulary).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "eval/logits_file.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader takes a path (it checks the file's length against its header), so the input goes
  // through a file of this process's own.
  static const std::string path = [] {
    std::string p = "/tmp/llms_logits_fuzz_" + std::to_string(getpid());
    std::atexit([] { std::remove(("/tmp/llms_logits_fuzz_" + std::to_string(getpid())).c_str()); });
    return p;
  }();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    llms::eval::LogitsFileReader reader(path);
    const auto& h = reader.header();
    std::vector<float> row(h.n_vocab);
    const uint64_t rows = static_cast<uint64_t>(h.n_windows) * h.rows_per_window;
    for (uint64_t r = 0; r < rows; ++r) reader.read_row(row);
  } catch (const llms::Error&) {
  }
  return 0;
}
