// eval/logits_file: see logits_file.h.
#include "eval/logits_file.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "eval/log_probs.h"
#include "quant/float_convert.h"
#include "util/error.h"

namespace llms::eval {
namespace {

constexpr char kMagic[8] = {'L', 'L', 'M', 'S', 'L', 'O', 'G', 'P'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 5 * 4 + 8;

template <class T>
void put(std::ofstream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
bool get(std::ifstream& in, T& v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&v), sizeof v));
}

}  // namespace

void LogitsFileHeader::check_matches(const LogitsFileHeader& current,
                                     const std::string& path) const {
  auto refuse = [&](const std::string& what) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--kl-divergence-base: '{}' {}", path, what));
  };
  if (n_vocab != current.n_vocab) {
    refuse(fmt::format("holds rows of {} logits; this model has {}", n_vocab, current.n_vocab));
  }
  if (vocabulary_hash != current.vocabulary_hash) {
    refuse("was made with another vocabulary (another model family)");
  }
  if (ctx != current.ctx) refuse(fmt::format("was made with --ctx {}, not {}", ctx, current.ctx));
  if (n_windows != current.n_windows || tokens != current.tokens) {
    refuse(fmt::format("was made from another text ({} windows; this text gives {}{})", n_windows,
                       current.n_windows,
                       n_windows == current.n_windows ? ", with other tokens" : ""));
  }
}

void VocabularyHash::add_token(std::string_view text) {
  for (const char c : text) {
    h_ ^= static_cast<uint8_t>(c);
    h_ *= 0x100000001b3ull;
  }
  h_ ^= 0xff;  // a separator no token text holds, so ("ab", "c") differs from ("a", "bc")
  h_ *= 0x100000001b3ull;
}

LogitsFileWriter::LogitsFileWriter(const std::string& path, const LogitsFileHeader& header)
    : path_(path),
      out_(path, std::ios::binary | std::ios::trunc),
      n_vocab_(header.n_vocab),
      rows_expected_(static_cast<uint64_t>(header.n_windows) * header.rows_per_window),
      scratch_(header.n_vocab) {
  if (!out_) throw Error(Error::Kind::kIo, fmt::format("--save-logits: cannot write '{}'", path));
  out_.write(kMagic, sizeof kMagic);
  put(out_, kVersion);
  put(out_, header.n_vocab);
  put(out_, header.ctx);
  put(out_, header.n_windows);
  put(out_, header.rows_per_window);
  put(out_, header.vocabulary_hash);
  out_.write(reinterpret_cast<const char*>(header.tokens.data()),
             static_cast<std::streamsize>(header.tokens.size() * sizeof(int32_t)));
}

void LogitsFileWriter::write_row(std::span<const float> log_probs) {
  put(out_, arg_max(log_probs));
  quant::fp32_to_fp16_row(log_probs.data(), scratch_.data(), n_vocab_);
  out_.write(reinterpret_cast<const char*>(scratch_.data()),
             static_cast<std::streamsize>(scratch_.size() * sizeof(uint16_t)));
  ++rows_written_;
}

void LogitsFileWriter::finish() {
  out_.flush();
  if (!out_) throw Error(Error::Kind::kIo, fmt::format("--save-logits: writing '{}' failed", path_));
  if (rows_written_ != rows_expected_) {
    throw Error(Error::Kind::kInternal,
                fmt::format("--save-logits: {} rows written, {} expected", rows_written_,
                            rows_expected_));
  }
}

LogitsFileReader::LogitsFileReader(const std::string& path)
    : path_(path), in_(path, std::ios::binary) {
  auto refuse = [&](const std::string& what) {
    throw Error(Error::Kind::kInvalidFile,
                fmt::format("--kl-divergence-base: '{}' {}", path, what));
  };
  if (!in_) refuse("cannot be opened");
  char magic[8] = {};
  uint32_t version = 0;
  if (!in_.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) {
    refuse("is not a logits file written by `llmserve perplexity --save-logits`");
  }
  if (!get(in_, version) || version != kVersion) {
    refuse(fmt::format("has version {}; this build reads version {}", version, kVersion));
  }
  LogitsFileHeader& h = header_;
  if (!get(in_, h.n_vocab) || !get(in_, h.ctx) || !get(in_, h.n_windows) ||
      !get(in_, h.rows_per_window) || !get(in_, h.vocabulary_hash)) {
    refuse("is truncated (in its header)");
  }
  if (h.n_vocab == 0 || h.n_vocab > (1u << 24) || h.ctx == 0 || h.ctx > (1u << 24) ||
      h.rows_per_window >= h.ctx || h.n_windows > (1u << 24)) {
    refuse("has sizes out of range in its header");
  }
  const uint64_t n_tokens = static_cast<uint64_t>(h.n_windows) * h.ctx;
  const uint64_t expected = kHeaderBytes + n_tokens * sizeof(int32_t) +
                            static_cast<uint64_t>(h.n_windows) * h.rows_per_window *
                                (sizeof(int32_t) + h.n_vocab * sizeof(uint16_t));
  std::error_code ec;
  const uint64_t actual = std::filesystem::file_size(path, ec);
  if (ec || actual != expected) {
    refuse(fmt::format("is {} bytes; its header says {}", ec ? 0 : actual, expected));
  }
  h.tokens.resize(n_tokens);
  in_.read(reinterpret_cast<char*>(h.tokens.data()),
           static_cast<std::streamsize>(n_tokens * sizeof(int32_t)));
  if (!in_) refuse("is truncated (in its tokens)");
  scratch_.resize(h.n_vocab);
}

int32_t LogitsFileReader::read_row(std::span<float> log_probs) {
  int32_t top = 0;
  if (!get(in_, top) || !in_.read(reinterpret_cast<char*>(scratch_.data()),
                static_cast<std::streamsize>(scratch_.size() * sizeof(uint16_t)))) {
    throw Error(Error::Kind::kInvalidArgument,
                fmt::format("--kl-divergence-base: '{}' ended early", path_));
  }
  quant::fp16_to_fp32_row(scratch_.data(), log_probs.data(), header_.n_vocab);
  log_softmax(log_probs, log_probs);
  return top;
}

}  // namespace llms::eval
