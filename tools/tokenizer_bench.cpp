// tools/tokenizer_bench: single-threaded encode/decode throughput of llmserve's tokenizer on a
// mixed corpus, printed as one JSON object (no timed assertions anywhere; this is a measurement).
//
//   tokenizer_bench MODEL.gguf CORPUS.jsonl [TARGET_MB] [--hostile]
//
// The text is every valid corpus string joined by "\n", repeated to about TARGET_MB (default 4).
// "whole" encodes it in one call; "lines" encodes each string separately. tools/
// tokenizer_bench_hf.py measures Hugging Face tokenizers on the same text. --hostile adds
// timings for adversarial inputs ("a" x 1M, 50k spaces, 1M digits, 10 MB mixed).
//
// Not part of the CMake build yet (the lead wires benchmark commands); build by hand with
//   g++ -std=c++20 -O2 -Isrc/tokenizer/include -Isrc/gguf/include -Isrc/util/include
//       tools/tokenizer_bench.cpp build/DIR/src/tokenizer/libllms_tokenizer.a
//       build/DIR/src/gguf/libllms_gguf.a build/DIR/src/util/libllms_util.a -lpcre2-8 -pthread
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Minimal extraction of the "text" field of each JSONL line (the corpus is our own file; entries
// with "hex" are skipped). Handles the JSON escapes json.dumps produces.
std::vector<std::string> read_corpus(const char* path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    const size_t key = line.find("\"text\": \"");
    if (key == std::string::npos) continue;
    std::string s;
    for (size_t i = key + 9; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] != '\\') {
        s.push_back(line[i]);
        continue;
      }
      const char e = line[++i];
      switch (e) {
        case 'n':
          s.push_back('\n');
          break;
        case 't':
          s.push_back('\t');
          break;
        case 'r':
          s.push_back('\r');
          break;
        case 'b':
          s.push_back('\b');
          break;
        case 'f':
          s.push_back('\f');
          break;
        case 'u': {
          char32_t cp = std::stoul(line.substr(i + 1, 4), nullptr, 16);
          i += 4;
          if (cp >= 0xD800 && cp < 0xDC00 && line.compare(i + 1, 2, "\\u") == 0) {
            const char32_t lo = std::stoul(line.substr(i + 3, 4), nullptr, 16);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          }
          llms::tokenizer::append_utf8(cp, s);
          break;
        }
        default:
          s.push_back(e);
      }
    }
    out.push_back(s);
  }
  return out;
}

struct Timing {
  double seconds;
  size_t tokens;
};

template <typename Fn>
Timing best_of(int runs, Fn&& fn) {
  Timing best{1e30, 0};
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    const size_t tokens = fn();
    const double s = seconds_since(t0);
    if (s < best.seconds) best = {s, tokens};
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf CORPUS.jsonl [TARGET_MB] [--hostile]\n", argv[0]);
    return 2;
  }
  const double target_mb = argc > 3 && argv[3][0] != '-' ? std::atof(argv[3]) : 4.0;
  bool hostile = false;
  for (int i = 3; i < argc; ++i) hostile = hostile || std::strcmp(argv[i], "--hostile") == 0;

  auto t0 = Clock::now();
  auto file = llms::gguf::GgufFile::open(argv[1]);
  const auto tok = llms::tokenizer::Tokenizer::from_gguf(file);
  const double load_s = seconds_since(t0);

  const auto lines = read_corpus(argv[2]);
  std::string block;
  for (const auto& s : lines) block += s + "\n";
  std::string text;
  while (text.size() < target_mb * 1e6) text += block;
  const double mb = text.size() / 1e6;

  const llms::tokenizer::EncodeOptions opts{.add_special = false, .parse_special = false};
  const Timing whole = best_of(3, [&] { return tok.encode(text, opts).size(); });
  const size_t reps = static_cast<size_t>(text.size() / block.size());
  const Timing per_line = best_of(3, [&] {
    size_t n = 0;
    for (size_t r = 0; r < reps; ++r) {
      for (const auto& s : lines) n += tok.encode(s, opts).size();
    }
    return n;
  });
  const auto ids = tok.encode(text, opts);
  const Timing decode = best_of(3, [&] { return tok.decode(ids).size(); });

  std::printf("{\"model\": \"%s\", \"load_s\": %.3f, \"text_mb\": %.3f, \"tokens\": %zu,\n",
              argv[1], load_s, mb, whole.tokens);
  std::printf(" \"encode_whole_mb_s\": %.2f, \"encode_lines_mb_s\": %.2f, \"decode_mb_s\": %.2f",
              mb / whole.seconds, mb / per_line.seconds, mb / decode.seconds);
  if (hostile) {
    struct Case {
      const char* name;
      std::string text;
    };
    std::vector<Case> cases = {
        {"a_x_1M", std::string(1000000, 'a')},
        {"spaces_50k", std::string(50000, ' ')},
        {"spaces_50k_then_word", std::string(50000, ' ') + "word"},
        {"digits_1M", std::string(1000000, '7')},
        {"newlines_1M", std::string(1000000, '\n')},
        {"mixed_10MB", text.substr(0, 10000000)},
    };
    while (cases.back().text.size() < 10000000) cases.back().text += block;
    cases.back().text.resize(10000000);
    for (const auto& c : cases) {
      const Timing t = best_of(1, [&] { return tok.encode(c.text, opts).size(); });
      std::printf(",\n \"%s\": {\"seconds\": %.3f, \"tokens\": %zu}", c.name, t.seconds, t.tokens);
    }
  }
  std::printf("}\n");
  return 0;
}
