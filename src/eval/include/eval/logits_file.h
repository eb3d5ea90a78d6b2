// eval/logits_file: a perplexity run's log-probabilities, saved so that another run (another KV
// type, another quantization of the same model) can be compared with it token by token.
//
// Layout (little-endian): "LLMSLOGP", u32 version (1), u32 n_vocab, u32 ctx, u32 n_windows,
// u32 rows_per_window, u64 vocabulary hash, n_windows * ctx i32 token ids (the windows' text),
// then rows_per_window rows per window, in order, each: i32 the most likely token (exact, from
// the f32 logits), n_vocab f16 log-probabilities (log-softmax of the logits). f16 keeps a
// log-probability to ~0.01 absolute at -20 at half the size of f32; the reader renormalizes a
// row, so rounding adds no first-order term to a KL-divergence, and the exact top token keeps
// near-ties from flipping the top-token agreement.
#pragma once

#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace llms::eval {

struct LogitsFileHeader {
  uint32_t n_vocab = 0;
  uint32_t ctx = 0;
  uint32_t n_windows = 0;
  uint32_t rows_per_window = 0;
  uint64_t vocabulary_hash = 0;
  std::vector<int32_t> tokens;  // n_windows * ctx

  // Throws llms::Error(kInvalidArgument) naming the first difference from `current` (vocabulary
  // size, vocabulary, window, text): logits of another model or text cannot be compared.
  void check_matches(const LogitsFileHeader& current, const std::string& path) const;
};

// FNV-1a over the token texts in id order: equal vocabularies, equal hashes.
class VocabularyHash {
 public:
  void add_token(std::string_view text);
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

class LogitsFileWriter {
 public:
  // Throws llms::Error(kIo) when the file cannot be written.
  LogitsFileWriter(const std::string& path, const LogitsFileHeader& header);
  void write_row(std::span<const float> log_probs);  // n_vocab values
  // Flushes; throws if fewer rows than the header promises were written, or on a write error.
  void finish();

 private:
  std::string path_;
  std::ofstream out_;
  uint32_t n_vocab_ = 0;
  uint64_t rows_expected_ = 0;
  uint64_t rows_written_ = 0;
  std::vector<uint16_t> scratch_;
};

class LogitsFileReader {
 public:
  // Reads and checks the header; throws llms::Error(kInvalidFile) for a file that is not a
  // logits file, of another version, truncated, or whose sizes disagree with its length.
  explicit LogitsFileReader(const std::string& path);
  const LogitsFileHeader& header() const { return header_; }
  // n_vocab values, renormalized (they sum to 1 after f16 rounding); returns the row's most
  // likely token as the writer saw it.
  int32_t read_row(std::span<float> log_probs);

 private:
  std::string path_;
  std::ifstream in_;
  LogitsFileHeader header_;
  std::vector<uint16_t> scratch_;
};

}  // namespace llms::eval
