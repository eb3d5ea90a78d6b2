// `llmserve bench-tokenizer -m MODEL [--corpus FILE] [--mb N] [--json] [--hf]`: single-threaded
// tokenizer speed on a mixed corpus, and the same figures for Hugging Face `tokenizers` on the
// very same text with --hf. A measurement, never an assertion.
//
// The text: every string of the corpus (a JSONL file's "text" fields, default the committed
// tokenizer golden corpus: code, prose in many scripts, emoji, whitespace runs, numbers, URLs;
// any other file is taken whole) joined with "\n" and repeated to about --mb megabytes.
// Figures, each the best of --runs:
//   encode         the whole text in one encode() call: MB/s of input and tokens/s
//   encode_lines   each corpus string in its own call, as many times as the text repeats it
//                  (many short prompts: per-call overhead shows here)
//   decode         decode() of all ids: MB/s of output and tokens/s
//   stream         IncrementalDetokenizer::push per token (what a server does per generated
//                  token), ns/token, without and with two stop strings
// Special-token text is not parsed (user text) and no BOS/EOS is added. --hostile adds one timed
// encode of each adversarial input ("a" x 1M, 50k spaces, 1M digits, 1M newlines, 10 MB of the
// text): linear-time tokenization shows as seconds proportional to the length.
//
// --hf writes the text to a temporary file and runs tools/tokenizer_bench_hf.py on it (python3,
// HF tokenizers on one thread, the tokenizer converted by transformers from the same GGUF file),
// then reports its figures beside ours and the ratios (> 1: llmserve is faster). Every figure is
// given per wall second and per CPU second of the measuring thread (cpu_*); the ratios use CPU
// time, which other processes on a busy machine do not inflate.
#include "bench_tokenizer_command.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model_registry.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::cli {

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

struct BenchTokenizerOptions {
  std::string model = "default";
  std::string cache_dir;
  std::string corpus;
  double mb = 4.0;
  int runs = 3;
  bool as_json = false;
  bool hf = false;
  bool hostile = false;
  std::string python = "python3";
  std::string hf_script;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// CPU time of the calling thread: unlike wall time it does not count the time other processes
// of a busy machine hold the core, so ratios between two programs stay meaningful there.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Timing {
  double wall = 0.0;  // seconds, best run
  double cpu = 0.0;   // thread CPU seconds, best run
  size_t count = 0;   // what fn returned
};

// The best of `runs` calls of fn (wall and CPU time each their own minimum).
template <typename Fn>
Timing best_of(int runs, Fn&& fn) {
  Timing best;
  for (int r = 0; r < runs; ++r) {
    const auto t = Clock::now();
    const double c = thread_cpu_seconds();
    const size_t n = fn();
    const double cpu = thread_cpu_seconds() - c;
    const double wall = seconds_since(t);
    if (r == 0 || wall < best.wall) best.wall = wall;
    if (r == 0 || cpu < best.cpu) best.cpu = cpu;
    best.count = n;
  }
  best.wall = std::max(best.wall, 1e-9);
  best.cpu = std::max(best.cpu, 1e-9);
  return best;
}

// First existing path among the installed layout and the source tree.
std::filesystem::path locate(const std::filesystem::path& installed,
                             const std::filesystem::path& source_rel, const char* what) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::filesystem::path> candidates;
  if (!ec) candidates.push_back(exe.parent_path() / ".." / "share" / "llmserve" / installed);
  candidates.push_back(std::filesystem::path(LLMS_SOURCE_DIR) / source_rel);
  for (const auto& c : candidates) {
    if (std::filesystem::exists(c)) return c;
  }
  throw Error(Error::Kind::kNotFound,
              fmt::format("cannot find the {} (looked in {} and {})", what,
                          candidates.front().string(), candidates.back().string()));
}

// The corpus strings: the "text" field of each JSONL line (entries without one, such as the
// golden corpus's invalid-UTF-8 "hex" entries, are left out), or a non-JSONL file as one string.
std::vector<std::string> read_corpus(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Error::Kind::kNotFound, "--corpus: cannot read " + path.string());
  std::vector<std::string> strings;
  if (path.extension() != ".jsonl") {
    std::stringstream ss;
    ss << in.rdbuf();
    strings.push_back(ss.str());
  } else {
    std::string line;
    size_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty()) continue;
      try {
        const Json entry = Json::parse(line);
        if (entry.is_object() && entry.contains("text") && entry["text"].is_string()) {
          strings.push_back(entry["text"].get<std::string>());
        }
      } catch (const Json::exception& e) {
        throw Error(Error::Kind::kInvalidArgument,
                    fmt::format("--corpus: {} line {}: {}", path.string(), line_no, e.what()));
      }
    }
  }
  size_t n_bytes = 0;
  for (const auto& s : strings) n_bytes += s.size();
  if (n_bytes == 0) {
    throw Error(Error::Kind::kInvalidArgument, "--corpus: " + path.string() + " has no text");
  }
  return strings;
}

// A temporary file holding `data`; removed when this goes out of scope.
class TempFile {
 public:
  TempFile(const std::string& data, const char* suffix) {
    const char* dir = std::getenv("TMPDIR");
    std::string pattern =
        std::string(dir && *dir ? dir : "/tmp") + "/llmserve-bench-XXXXXX" + suffix;
    const int fd = mkstemps(pattern.data(), static_cast<int>(std::string_view(suffix).size()));
    if (fd < 0) throw Error(Error::Kind::kIo, "cannot create a temporary file in " + pattern);
    path_ = pattern;
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
      if (n <= 0) {
        ::close(fd);
        throw Error(Error::Kind::kIo, "cannot write " + path_);
      }
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs argv (no shell, so paths need no quoting) and returns its standard output; stderr passes
// through. Throws naming the command when it cannot start or exits unsuccessfully.
std::string run_capture(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe(fds) != 0) throw Error(Error::Kind::kIo, "pipe() failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(Error::Kind::kIo, "fork() failed");
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "llmserve: cannot run %s\n", args[0]);
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error(Error::Kind::kIo,
                fmt::format("--hf: {} {} failed (exit status {}); it needs "
                            "pip install tokenizers transformers gguf",
                            argv[0], argv[1], WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  return out;
}

// mb_s and tokens_per_s are per wall second; cpu_mb_s per CPU second of the thread.
Json speed(const Timing& t, size_t n_bytes, size_t n_tokens) {
  const auto mb = static_cast<double>(n_bytes) / 1e6;
  return Json{{"seconds", t.wall},
              {"cpu_seconds", t.cpu},
              {"mb_s", mb / t.wall},
              {"tokens_per_s", static_cast<double>(n_tokens) / t.wall},
              {"cpu_mb_s", mb / t.cpu}};
}

// ns per token of streaming all `ids` through an IncrementalDetokenizer.
Json stream_cost(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids, int runs,
                 std::vector<std::string> stops) {
  const size_t n_stops = stops.size();
  bool stopped = false;
  const Timing t = best_of(runs, [&] {
    tokenizer::IncrementalDetokenizer detok(tok, {.stop_strings = stops, .skip_special = false});
    size_t n = 0;
    for (int32_t id : ids) n += detok.push(id).text.size();
    n += detok.finish().text.size();
    stopped = detok.stopped();
    return n;
  });
  const auto n = static_cast<double>(std::max<size_t>(1, ids.size()));
  return Json{{"ns_per_token", t.wall * 1e9 / n},
              {"cpu_ns_per_token", t.cpu * 1e9 / n},
              {"tokens", ids.size()},
              {"stop_strings", n_stops},
              {"stopped", stopped},
              {"text_bytes", t.count}};
}

double ratio(const Json& ours, const Json& theirs, const char* key) {
  const double a = ours.value(key, 0.0);
  const double b = theirs.value(key, 0.0);
  return b > 0 ? a / b : 0.0;
}

void print_human(const Json& r) {
  fmt::print("model    {} ({}, {} tokens, tokenizer loaded in {:.2f} s)\n",
             r["model"].get<std::string>(), r["tokenizer"].get<std::string>(),
             r["n_vocab"].get<int>(), r["load_s"].get<double>());
  fmt::print("text     {:.2f} MB: {} strings x {}, {} tokens ({:.2f} bytes/token)\n",
             r["text_bytes"].get<double>() / 1e6, r["strings"].get<size_t>(),
             r["repeats"].get<size_t>(), r["tokens"].get<size_t>(),
             r["text_bytes"].get<double>() / std::max(1.0, r["tokens"].get<double>()));
  auto line = [](const char* name, const Json& s) {
    fmt::print("{:<13}{:>8.2f} MB/s {:>8.2f} M tokens/s {:>8.2f} MB/s of CPU time\n", name,
               s["mb_s"].get<double>(), s["tokens_per_s"].get<double>() / 1e6,
               s["cpu_mb_s"].get<double>());
  };

  fmt::print("llmserve\n");
  line("  encode", r["encode"]);
  line("  lines", r["encode_lines"]);
  line("  decode", r["decode"]);
  fmt::print("  stream     {:>8.1f} ns/token ({:.1f} with {} stop strings; CPU {:.1f} / {:.1f})\n",
             r["stream"]["ns_per_token"].get<double>(),
             r["stream_stops"]["ns_per_token"].get<double>(),
             r["stream_stops"]["stop_strings"].get<size_t>(),
             r["stream"]["cpu_ns_per_token"].get<double>(),
             r["stream_stops"]["cpu_ns_per_token"].get<double>());
  if (!r.contains("hf")) return;
  const Json& hf = r["hf"];
  fmt::print("hf tokenizers {}\n", hf.value("tokenizers", std::string("?")));
  line("  encode", hf["encode"]);
  if (hf.contains("encode_lines")) line("  lines", hf["encode_lines"]);
  line("  decode", hf["decode"]);
  fmt::print("  stream     {:>8.1f} ns/token (CPU {:.1f}; Python's per-call cost included)\n",
             hf["stream"]["ns_per_token"].get<double>(),
             hf["stream"]["cpu_ns_per_token"].get<double>());
  const Json& v = r["vs_hf"];
  fmt::print(
      "llmserve / hf (CPU time): encode {:.2f}x, lines {:.2f}x, decode {:.2f}x, stream {:.2f}x; "
      "same token count: {}\n",
      v["encode"].get<double>(), v["encode_lines"].get<double>(), v["decode"].get<double>(),
      v["stream"].get<double>(), v["same_token_count"].get<bool>() ? "yes" : "no");
}

int bench_tokenizer(const BenchTokenizerOptions& opts) {
  if (!(opts.mb > 0.0) || opts.mb > 1024.0) {
    throw Error(Error::Kind::kInvalidArgument, "--mb must be in (0, 1024]");
  }
  if (opts.runs < 1) throw Error(Error::Kind::kInvalidArgument, "--runs must be >= 1");
  const auto path = resolve_model(opts.model, opts.cache_dir);
  const std::filesystem::path corpus_path =
      opts.corpus.empty() ? locate("tokenizer_corpus.jsonl", "tests/data/tokenizer/corpus.jsonl",
                                   "tokenizer corpus (give one with --corpus)")
                          : std::filesystem::path(opts.corpus);
  const std::vector<std::string> strings = read_corpus(corpus_path);

  auto t_load = Clock::now();
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  const double load_s = seconds_since(t_load);

  std::string block;
  size_t string_bytes = 0;
  for (const auto& s : strings) {
    block += s;
    block += '\n';
    string_bytes += s.size();
  }
  const auto target = static_cast<size_t>(opts.mb * 1e6);
  const size_t repeats = std::max<size_t>(1, (target + block.size() - 1) / block.size());
  std::string text;
  text.reserve(block.size() * repeats);
  for (size_t r = 0; r < repeats; ++r) text += block;

  const tokenizer::EncodeOptions user_text{.add_special = false, .parse_special = false};
  const Timing encode = best_of(opts.runs, [&] { return tok.encode(text, user_text).size(); });
  const size_t n_tokens = encode.count;
  const Timing lines = best_of(opts.runs, [&] {
    size_t n = 0;
    for (size_t r = 0; r < repeats; ++r) {
      for (const auto& s : strings) n += tok.encode(s, user_text).size();
    }
    return n;
  });
  const std::vector<int32_t> ids = tok.encode(text, user_text);
  const Timing decode = best_of(opts.runs, [&] { return tok.decode(ids).size(); });

  Json r;
  r["model"] = path.filename().string();
  r["tokenizer"] = tok.kind() == tokenizer::ModelKind::kByteLevelBpe ? "gpt2" : "llama";
  r["pre"] = tok.pre();
  r["n_vocab"] = tok.n_vocab();
  r["load_s"] = load_s;
  r["corpus"] = corpus_path.string();
  r["strings"] = strings.size();
  r["repeats"] = repeats;
  r["runs"] = opts.runs;
  r["threads"] = 1;
  r["text_bytes"] = text.size();
  r["tokens"] = n_tokens;
  r["encode"] = speed(encode, text.size(), n_tokens);
  r["encode_lines"] = speed(lines, string_bytes * repeats, lines.count);
  r["decode"] = speed(decode, decode.count, ids.size());
  r["stream"] = stream_cost(tok, ids, opts.runs, {});
  // Two stop strings that never occur in the text: the matching cost without an early stop.
  r["stream_stops"] = stream_cost(tok, ids, opts.runs, {"<|llmserve-stop|>", "\n###\n###\n"});

  if (opts.hostile) {
    std::vector<std::pair<const char*, std::string>> cases = {
        {"a_x_1M", std::string(1000000, 'a')},
        {"spaces_50k", std::string(50000, ' ')},
        {"spaces_50k_then_word", std::string(50000, ' ') + "word"},
        {"digits_1M", std::string(1000000, '7')},
        {"newlines_1M", std::string(1000000, '\n')},
        {"text_10MB", std::string()},
    };
    std::string& ten = cases.back().second;
    while (ten.size() < 10000000) ten += block;
    ten.resize(10000000);
    // Cut at a character boundary: drop a trailing partial (or whole) multi-byte character.
    while (!ten.empty() && (static_cast<unsigned char>(ten.back()) & 0xC0) == 0x80) ten.pop_back();
    if (!ten.empty() && static_cast<unsigned char>(ten.back()) >= 0xC0) ten.pop_back();
    Json hostile;
    for (const auto& c : cases) {  // (no structured binding: clang 14 cannot capture one)
      const std::string& input = c.second;
      const Timing t = best_of(1, [&] { return tok.encode(input, user_text).size(); });
      hostile[c.first] = Json{{"bytes", input.size()},
                              {"seconds", t.wall},
                              {"cpu_seconds", t.cpu},
                              {"tokens", t.count}};
    }
    r["hostile"] = std::move(hostile);
  }

  if (opts.hf) {
    const std::filesystem::path script =
        opts.hf_script.empty()
            ? locate("tokenizer_bench_hf.py", "tools/tokenizer_bench_hf.py", "HF benchmark script")
            : std::filesystem::path(opts.hf_script);
    const TempFile text_file(text, ".txt");
    const TempFile lines_file(Json(strings).dump(-1, ' ', false, Json::error_handler_t::replace),
                              ".json");
    const std::string out =
        run_capture({opts.python, script.string(), "--gguf", path.string(), "--text",
                     text_file.path(), "--lines", lines_file.path(), "--line-repeats",
                     std::to_string(repeats), "--runs", std::to_string(opts.runs),
                     "--stream-tokens", std::to_string(std::min<size_t>(ids.size(), 200000))});
    Json hf;
    try {
      hf = Json::parse(out);
    } catch (const Json::exception& e) {
      throw Error(Error::Kind::kInvalidArgument,
                  std::string("--hf: the script printed no JSON: ") + e.what());
    }
    Json vs;
    // Ratios of CPU-time figures: robust on a busy machine (both sides run single-threaded).
    vs["encode"] = ratio(r["encode"], hf["encode"], "cpu_mb_s");
    vs["encode_lines"] = hf.contains("encode_lines")
                             ? ratio(r["encode_lines"], hf["encode_lines"], "cpu_mb_s")
                             : 0.0;
    vs["decode"] = ratio(r["decode"], hf["decode"], "cpu_mb_s");
    vs["stream"] = ratio(hf["stream"], r["stream"], "cpu_ns_per_token");
    vs["same_token_count"] = hf.value("tokens", size_t{0}) == n_tokens;
    r["hf"] = std::move(hf);
    r["vs_hf"] = std::move(vs);
  }

  if (opts.as_json) {
    std::puts(r.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    print_human(r);
  }
  return 0;
}

}  // namespace

void add_bench_tokenizer_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<BenchTokenizerOptions>();
  auto* cmd = app.add_subcommand(
      "bench-tokenizer", "Single-threaded tokenizer speed on a mixed corpus (optionally vs HF)");
  cmd->add_option("-m,--model", opts->model, "GGUF file or registered model (default: default)");
  cmd->add_option("--corpus", opts->corpus,
                  "JSONL file with \"text\" fields, or any text file (default: the tokenizer "
                  "golden corpus)");
  cmd->add_option("--mb", opts->mb, "Size of the text in MB (the corpus repeated; default 4)");
  cmd->add_option("-r,--runs", opts->runs, "Runs of each measurement; the best is reported");
  cmd->add_flag("--json", opts->as_json, "Print JSON");
  cmd->add_flag("--hf", opts->hf,
                "Also measure Hugging Face tokenizers on the same text (python3 "
                "tools/tokenizer_bench_hf.py) and report the ratios");
  cmd->add_flag("--hostile", opts->hostile, "Also time adversarial inputs (long runs, 10 MB)");
  cmd->add_option("--python", opts->python, "Python interpreter for --hf (default python3)");
  cmd->add_option("--hf-script", opts->hf_script, "Path of tokenizer_bench_hf.py for --hf");
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  cmd->callback([opts, &exit_code] { exit_code = bench_tokenizer(*opts); });
}

}  // namespace llms::cli
