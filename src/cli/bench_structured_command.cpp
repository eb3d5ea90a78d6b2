// `llmserve bench-structured -m MODEL [--corpus FILE] [--limit N] [--json]`: structured output
// (the JSON Schema compiler and the grammar engine) over a corpus of schemas with valid and
// invalid instances, on a model's real vocabulary. A measurement, never an assertion: the exit
// status is 0 whatever the engine accepts or rejects; the report says it.
//
// The corpus (default $LLMS_SHARED_DATA_DIR/jsonschema-corpus.jsonl, else
// /work/shared/data/jsonschema-corpus.jsonl) has one JSON object a line: {"id", "schema",
// "tests": [{"valid", "data"}, ...]}. For each schema, on one thread:
//   compile   json_schema_to_grammar (default JsonSchemaOptions: flexible whitespace; none at
//             all with --whitespace compact) and compile_grammar under the server's default
//             CompileBudget, timed together; a refusal is grouped by the keyword it names.
//   walk      each instance (valid and invalid) written as order_keys_like_grammar(schema, data)
//             .dump(): compact (no whitespace at all), keys in the grammar's order, raw UTF-8, the
//             short escapes and \u00xx for other control characters, nlohmann's number spelling;
//             then encoded by the model's tokenizer (no special tokens, special-token text not
//             parsed) and fed token by token: before each token one fill_mask, timed alone
//             (steady_clock; also in thread CPU time); the token's bit decides: set, accept_token
//             and go on; clear, the walk is rejected there. After the last token one more fill_mask
//             (a generation needs it to allow a stop token): the walk is accepted iff every token
//             was allowed and is_accepting() holds, and then every stop token's bit must be set
//             (and none of them before). Every mask is also checked for padding or special rows let
//             through.
//   apply     (unless --no-apply) each walk again, now with warm caches, through the server's own
//             adapter (GrammarConstraintFactory: fill_mask + -inf into a logits row of the model's
//             width) beside a plain fill_mask on a second matcher at the same point, both timed:
//             their difference is the cost of applying a mask to a row.
// A valid instance that is rejected is walked again byte by byte to say whether the grammar
// refuses the text itself (a serialization the grammar does not write, or a gap of the compiler)
// or only its tokens (an inexact mask: a bug).
//
// --dump-vocab FILE and --dump-walks FILE (hidden) write the vocabulary (hex bytes per row, the
// special and stop ids) and every walk (text, token ids, our verdict and mask times) for
// tools/structured_peer_bench.py, which runs llguidance over the very same tokens.
#include "bench_structured_command.h"

#include <fmt/core.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "model_registry.h"
#include "server/constraint_compiler.h"
#include "structured/compile_budget.h"
#include "structured/grammar.h"
#include "structured/grammar_constraint.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"
#include "structured/vocabulary.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::cli {

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

struct BenchStructuredOptions {
  std::string model = "default";
  std::string cache_dir;
  std::string corpus;
  int limit = 0;
  bool as_json = false;
  bool no_apply = false;
  bool per_schema = false;
  std::string whitespace = "flexible";
  std::string dump_vocab;
  std::string dump_walks;
};

constexpr const char* kSerialization =
    "order_keys_like_grammar(schema, instance).dump(): compact JSON (no whitespace), keys in the "
    "grammar's order, raw UTF-8, short escapes and \\u00xx for other control characters, "
    "nlohmann's number spelling; tokenized with add_special=false, parse_special=false";

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// n, mean, p50, p99 and max of the samples (nearest-rank percentiles).
Json summarize(std::vector<double> v) {
  Json out;
  out["n"] = v.size();
  if (v.empty()) return out;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  auto rank = [&](double q) {
    const auto r = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size(), std::max<size_t>(r, 1)) - 1];
  };
  out["mean"] = sum / static_cast<double>(v.size());
  out["p50"] = rank(0.50);
  out["p99"] = rank(0.99);
  out["max"] = v.back();
  return out;
}

std::filesystem::path default_corpus() {
  const char* dir = std::getenv("LLMS_SHARED_DATA_DIR");
  return std::filesystem::path(dir && *dir ? dir : "/work/shared/data") / "jsonschema-corpus.jsonl";
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  const auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The CPU's model name as lscpu reports it (its "Model name:" line), else /proc/cpuinfo's.
std::string cpu_model() {
  if (FILE* p = ::popen("lscpu 2>/dev/null", "r")) {
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
    const auto at = out.find("Model name:");
    if (at != std::string::npos) {
      const auto end = out.find('\n', at);
      return trim(
          out.substr(at + 11, end == std::string::npos ? std::string::npos : end - at - 11));
    }
  }
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  }
  return "unknown";
}

double load_average_1m() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  in >> load;
  return load;
}

// What a refusal is grouped by: the keyword it names, the compile budget it ran out of, else its
// first words (up to the JSON pointer).
std::string refusal_reason(const std::string& message) {
  static const std::regex keyword("unsupported JSON Schema keyword '([^']+)'");
  std::smatch match;
  if (std::regex_search(message, match, keyword)) return match[1];
  static const std::regex time_budget("constraint too complex: compiling .+? took longer");
  if (std::regex_search(message, time_budget)) return "budget: time";
  static const std::regex budget("constraint too complex: (.+?) exceed");
  if (std::regex_search(message, match, budget)) return "budget: " + match[1].str();
  std::string head = message.substr(0, message.find(" at /"));
  if (head.size() > 80) head.resize(80);
  return head;
}

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// Text as a JSON string can hold it whatever its bytes (invalid UTF-8 replaced).
Json text_value(std::string_view text) {
  return Json::parse(Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace));
}

bool bit(std::span<const uint32_t> words, int32_t id) {
  return (words[static_cast<size_t>(id) / 32] >> (static_cast<uint32_t>(id) % 32) & 1u) != 0;
}

// One instance of a schema: how it was written and tokenized.
struct Instance {
  int index = 0;
  bool valid = false;
  std::string serialization;  // "grammar_order" or "as_given" (the schema was refused)
  std::string text;
  std::vector<int32_t> tokens;
};

struct WalkResult {
  bool accepted = false;
  int32_t rejected_at = -1;     // token index; == n tokens: all allowed but not a complete text
  bool accept_refused = false;  // the mask allowed the token but accept_token refused it
};

// Everything measured over the corpus.
struct Totals {
  std::vector<double> compile_ms;
  std::vector<std::pair<double, std::string>> compile_by_schema;
  std::vector<double> mask_us;
  double mask_wall_s = 0;
  double mask_cpu_s = 0;
  std::vector<double> mask_cpu_us;  // the same calls in thread CPU time (robust to a busy machine)
  std::vector<double> warm_fill_us;
  std::vector<double> warm_fill_apply_us;
  int64_t tokens_walked = 0;
  int64_t mask_violations = 0;  // padding/special (non-stop) rows allowed
  Json violation_examples = Json::array();
  int64_t stop_mismatches = 0;  // stop bits disagreeing with is_accepting()
  Json stop_mismatch_examples = Json::array();
  int64_t accept_refused = 0;            // allowed by the mask, refused by accept_token
  int64_t constraint_disagreements = 0;  // the adapter's row disagreeing with the plain mask
  int64_t tokenization_mismatches = 0;   // token bytes do not spell the text
  int64_t serialization_errors = 0;
};

class Bench {
 public:
  Bench(std::shared_ptr<const structured::TokenIndex> index, int32_t n_rows)
      : index_(std::move(index)),
        words_(static_cast<size_t>(index_->n_mask_words())),
        row_(static_cast<size_t>(n_rows), 0.0f) {
    for (int32_t id = 0; id < index_->n_tokens(); ++id) {
      if (!index_->is_text_token(id) && !index_->is_stop_token(id)) never_.push_back(id);
    }
  }

  Totals& totals() { return totals_; }
  size_t n_never_allowed() const { return never_.size(); }

  // Pass 1: the timed fill_mask walk.
  WalkResult walk(const std::shared_ptr<const structured::CompiledGrammar>& grammar,
                  const std::string& schema_id, const Instance& inst) {
    structured::Matcher matcher(grammar);
    WalkResult r;
    const size_t n = inst.tokens.size();
    for (size_t i = 0; i <= n; ++i) {
      const double c0 = thread_cpu_seconds();
      const auto t0 = Clock::now();
      matcher.fill_mask(words_);
      const auto t1 = Clock::now();
      const double cpu = thread_cpu_seconds() - c0;
      totals_.mask_cpu_s += cpu;
      totals_.mask_cpu_us.push_back(cpu * 1e6);
      totals_.mask_wall_s += std::chrono::duration<double>(t1 - t0).count();
      totals_.mask_us.push_back(micros(t1 - t0));
      check_never_allowed(schema_id, inst.index, static_cast<int>(i));
      if (i == n) {
        r.accepted = matcher.is_accepting();
        if (!r.accepted) r.rejected_at = static_cast<int32_t>(n);
        check_stop_bits(r.accepted, schema_id, inst.index, static_cast<int>(i));
        break;
      }
      check_stop_bits(matcher.is_accepting(), schema_id, inst.index, static_cast<int>(i));
      const int32_t id = inst.tokens[i];
      if (!bit(words_, id)) {
        r.rejected_at = static_cast<int32_t>(i);
        break;
      }
      if (!matcher.accept_token(id)) {
        ++totals_.accept_refused;
        r.accept_refused = true;
        r.rejected_at = static_cast<int32_t>(i);
        break;
      }
      ++totals_.tokens_walked;
    }
    return r;
  }

  // Pass 2: the same walk, caches warm, through the server's adapter and a plain matcher.
  void walk_apply(const std::shared_ptr<const structured::CompiledGrammar>& grammar,
                  const Instance& inst) {
    const structured::GrammarConstraintFactory factory(grammar);
    const auto constraint = factory.make();
    structured::Matcher plain(grammar);
    const size_t n = inst.tokens.size();
    for (size_t i = 0; i <= n; ++i) {
      std::fill(row_.begin(), row_.end(), 0.0f);  // fresh logits, as after a forward pass
      const auto t0 = Clock::now();
      plain.fill_mask(words_);
      const auto t1 = Clock::now();
      constraint->mask(row_);
      const auto t2 = Clock::now();
      totals_.warm_fill_us.push_back(micros(t1 - t0));
      totals_.warm_fill_apply_us.push_back(micros(t2 - t1));
      if (i == n) break;
      const int32_t id = inst.tokens[i];
      const bool allowed = bit(words_, id);
      if (allowed != (row_[static_cast<size_t>(id)] == 0.0f)) ++totals_.constraint_disagreements;
      if (!allowed || !plain.accept_token(id)) break;
      constraint->accept(id);
    }
  }

 private:
  void check_never_allowed(const std::string& schema_id, int instance, int step) {
    for (int32_t id : never_) {
      if (!bit(words_, id)) continue;
      ++totals_.mask_violations;
      if (totals_.violation_examples.size() < 10) {
        totals_.violation_examples.push_back(
            Json{{"id", schema_id}, {"instance", instance}, {"step", step}, {"token", id}});
      }
    }
  }

  void check_stop_bits(bool accepting, const std::string& schema_id, int instance, int step) {
    for (int32_t id : index_->stop_token_ids()) {
      if (bit(words_, id) == accepting) continue;
      ++totals_.stop_mismatches;
      if (totals_.stop_mismatch_examples.size() < 10) {
        totals_.stop_mismatch_examples.push_back(Json{{"id", schema_id},
                                                      {"instance", instance},
                                                      {"step", step},
                                                      {"stop_token", id},
                                                      {"accepting", accepting}});
      }
    }
  }

  std::shared_ptr<const structured::TokenIndex> index_;
  std::vector<uint32_t> words_;
  std::vector<float> row_;
  std::vector<int32_t> never_;  // rows no mask may allow: padding and non-stop special tokens
  Totals totals_;
};

// Why a valid instance was rejected: where, which token, and whether the grammar refuses the
// text byte by byte too.
Json diagnose(const std::shared_ptr<const structured::CompiledGrammar>& grammar,
              const tokenizer::Tokenizer& tok, const std::string& schema_id, const Instance& inst,
              const WalkResult& r) {
  Json d;
  d["id"] = schema_id;
  d["instance"] = inst.index;
  d["n_tokens"] = inst.tokens.size();
  size_t offset = 0;
  const auto at = static_cast<size_t>(std::max(0, r.rejected_at));
  for (size_t i = 0; i < at && i < inst.tokens.size(); ++i) {
    offset += tok.token_bytes(inst.tokens[i]).size();
  }
  d["rejected_at_token"] = r.rejected_at;
  d["text_offset"] = offset;
  if (at < inst.tokens.size()) {
    d["token"] = inst.tokens[at];
    d["token_text"] = text_value(tok.token_bytes(inst.tokens[at]));
  }
  structured::Matcher whole(grammar);
  const bool bytes_accepted = whole.accept_bytes(inst.text) && whole.is_accepting();
  structured::Matcher prefix(grammar);
  size_t k = 0;
  while (k < inst.text.size() && prefix.accept_bytes(std::string_view(inst.text).substr(k, 1))) {
    ++k;
  }
  if (r.accept_refused) {
    d["verdict"] = "the mask allowed the token but accept_token refused it (engine bug)";
  } else if (bytes_accepted) {
    d["verdict"] =
        "the grammar accepts the text byte by byte but not these tokens: inexact mask (engine "
        "bug)";
  } else if (k == inst.text.size()) {
    d["verdict"] = "the grammar accepts every byte but the text is not complete for it";
  } else {
    d["verdict"] = "the grammar refuses the text itself at byte " + std::to_string(k);
  }
  d["bytes_accepted_prefix"] = k;
  const size_t from = k > 60 ? k - 60 : 0;
  d["context"] = text_value(std::string_view(inst.text).substr(from, k - from));
  d["next"] = text_value(std::string_view(inst.text).substr(k, 40));
  return d;
}

// The rows as the grammar engine sees them (bytes, special, stop) and, for a peer that wants to
// encode text itself, the tokenizer's own spelling, GGUF token types, merges and pre-tokenizer.
Json dump_vocabulary(const gguf::GgufFile& file, const tokenizer::Tokenizer& tok,
                     const structured::Vocabulary& v, const std::string& model) {
  Json out;
  out["model"] = model;
  out["n_rows"] = v.token_bytes.size();
  out["n_tokenizer"] = tok.n_vocab();
  out["tokenizer_model"] = tok.kind() == tokenizer::ModelKind::kByteLevelBpe ? "gpt2" : "llama";
  out["pre"] = tok.pre();
  Json tokens = Json::array();
  Json special = Json::array();
  for (size_t id = 0; id < v.token_bytes.size(); ++id) {
    tokens.push_back(hex(v.token_bytes[id]));
    if (v.is_special[id]) special.push_back(id);
  }
  out["tokens_hex"] = std::move(tokens);
  out["special_ids"] = std::move(special);
  out["stop_token_ids"] = v.stop_token_ids;
  Json text = Json::array();
  Json types = Json::array();
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    text.push_back(text_value(tok.token_text(id)));
    types.push_back(static_cast<int32_t>(tok.token_type(id)));
  }
  out["tokens_text"] = std::move(text);
  out["token_types"] = std::move(types);  // tokenizer.ggml.token_type: 1 normal, 3 control, ...
  out["merges"] = file.get_strings("tokenizer.ggml.merges").value_or(std::vector<std::string>{});
  return out;
}

void print_human(const Json& r) {
  const Json& s = r["schemas"];
  fmt::print("model     {} ({} logits rows, {} text tokens), cpu {}, {} thread\n",
             r["model"].get<std::string>(), r["vocabulary"]["rows"].get<int64_t>(),
             r["vocabulary"]["text_tokens"].get<int64_t>(), r["cpu"].get<std::string>(),
             r["threads"].get<int>());
  fmt::print("schemas   {} compiled, {} refused of {}\n", s["compiled"].get<int>(),
             s["refused"].get<int>(), s["total"].get<int>());
  for (const auto& [k, n] : s["refusals_by_keyword"].items()) {
    fmt::print("            {}: {}\n", k, n.get<int>());
  }
  auto dist = [](const char* name, const Json& d, const char* unit) {
    if (d.value("n", 0) == 0) return;
    fmt::print("{:<11}mean {:.1f} {}, p50 {:.1f}, p99 {:.1f}, max {:.1f} ({} samples)\n", name,
               d["mean"].get<double>(), unit, d["p50"].get<double>(), d["p99"].get<double>(),
               d["max"].get<double>(), d["n"].get<size_t>());
  };
  dist("compile", r["compile_ms"], "ms");
  dist("mask", r["mask_us"], "us");
  if (r.contains("apply")) {
    dist("warm fill", r["apply"]["warm_fill_us"], "us");
    dist("fill+apply", r["apply"]["warm_fill_apply_us"], "us");
  }
  fmt::print("valid     {} of {} accepted\n", r["valid"]["accepted"].get<int>(),
             r["valid"]["total"].get<int>());
  fmt::print("invalid   {} of {} rejected\n", r["invalid"]["rejected"].get<int>(),
             r["invalid"]["total"].get<int>());
  fmt::print("checks    {} mask violations, {} stop-bit mismatches, {} accept refusals\n",
             r["checks"]["mask_violations"].get<int64_t>(),
             r["checks"]["stop_bit_mismatches"].get<int64_t>(),
             r["checks"]["accept_refused_allowed_token"].get<int64_t>());
}

int bench_structured(const BenchStructuredOptions& opts) {
  if (opts.limit < 0) throw Error(Error::Kind::kInvalidArgument, "--limit must be >= 0");
  const std::filesystem::path corpus_path =
      opts.corpus.empty() ? default_corpus() : std::filesystem::path(opts.corpus);
  std::ifstream in(corpus_path, std::ios::binary);
  if (!in) throw Error(Error::Kind::kNotFound, "--corpus: cannot read " + corpus_path.string());

  const double load_start = load_average_1m();
  const auto path = resolve_model(opts.model, opts.cache_dir);
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  // Logits rows: the widest of the vocabulary and the embedding / output matrices.
  int64_t n_rows = tok.n_vocab();
  for (const char* name : {"token_embd.weight", "output.weight"}) {
    if (const auto* t = file.find_tensor(name)) {
      n_rows = std::max<int64_t>(n_rows, static_cast<int64_t>(t->ne[1]));
    }
  }
  structured::Vocabulary vocabulary =
      server::structured_vocabulary(tok, static_cast<int32_t>(n_rows));
  if (!opts.dump_vocab.empty()) {
    std::ofstream out(opts.dump_vocab, std::ios::binary);
    out << dump_vocabulary(file, tok, vocabulary, path.filename().string())
               .dump(-1, ' ', false, Json::error_handler_t::replace);
    if (!out) throw Error(Error::Kind::kIo, "--dump-vocab: cannot write " + opts.dump_vocab);
  }
  const auto t_index = Clock::now();
  const auto index = structured::build_token_index(std::move(vocabulary));
  const double index_ms = micros(Clock::now() - t_index) / 1000.0;
  int64_t n_text = 0;
  for (int32_t id = 0; id < index->n_tokens(); ++id) n_text += index->is_text_token(id) ? 1 : 0;

  std::ofstream walks_out;
  if (!opts.dump_walks.empty()) {
    walks_out.open(opts.dump_walks, std::ios::binary);
    if (!walks_out) throw Error(Error::Kind::kIo, "--dump-walks: cannot write " + opts.dump_walks);
  }

  Bench bench(index, static_cast<int32_t>(n_rows));
  Totals& totals = bench.totals();
  const tokenizer::EncodeOptions user_text{.add_special = false, .parse_special = false};
  structured::JsonSchemaOptions schema_options;
  if (opts.whitespace == "compact") {
    schema_options.whitespace = structured::JsonSchemaOptions::Whitespace::kCompact;
  } else if (opts.whitespace != "flexible") {
    throw Error(Error::Kind::kInvalidArgument, "--whitespace must be flexible or compact");
  }
  int n_schemas = 0, n_compiled = 0, n_refused = 0;
  int n_valid = 0, n_valid_accepted = 0, n_invalid = 0, n_invalid_rejected = 0;
  int n_not_walked = 0;
  std::map<std::string, int> refusals;
  Json refused_list = Json::array();
  Json valid_rejected = Json::array();
  Json invalid_accepted = Json::array();
  Json per_schema = Json::array();
  struct Compiled {
    std::shared_ptr<const structured::CompiledGrammar> grammar;
    std::vector<Instance> instances;
  };
  std::vector<Compiled> compiled_all;

  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (opts.limit > 0 && n_schemas >= opts.limit) break;
    Json record;
    try {
      record = Json::parse(line);
    } catch (const Json::exception& e) {
      throw Error(Error::Kind::kInvalidArgument,
                  fmt::format("--corpus: {} line {}: {}", corpus_path.string(), line_no, e.what()));
    }
    if (!record.is_object() || !record.contains("schema") || !record.contains("tests")) {
      throw Error(Error::Kind::kInvalidArgument,
                  fmt::format("--corpus: {} line {}: needs \"schema\" and \"tests\"",
                              corpus_path.string(), line_no));
    }
    ++n_schemas;
    const std::string id = record.value("id", fmt::format("line {}", line_no));
    const Json& schema = record["schema"];
    Json entry{{"id", id}};

    std::shared_ptr<const structured::CompiledGrammar> grammar;
    std::string refusal;
    size_t grammar_bytes = 0;
    const auto t0 = Clock::now();
    try {
      structured::CompileBudget budget;  // the server's limits
      const std::string text = structured::json_schema_to_grammar(schema, schema_options, budget);
      grammar_bytes = text.size();
      grammar = structured::compile_grammar(text, index, budget);
    } catch (const Error& e) {
      refusal = e.what();
      if (e.kind() != Error::Kind::kInvalidArgument) refusal = "(not a refusal) " + refusal;
    } catch (const std::exception& e) {
      refusal = std::string("(unexpected exception) ") + e.what();
    }
    const double compile_ms = micros(Clock::now() - t0) / 1000.0;
    if (grammar) {
      ++n_compiled;
      totals.compile_ms.push_back(compile_ms);
      totals.compile_by_schema.emplace_back(compile_ms, id);
      entry["compile_ms"] = compile_ms;
      entry["grammar_bytes"] = grammar_bytes;
    } else {
      ++n_refused;
      const std::string reason = refusal_reason(refusal);
      ++refusals[reason];
      refused_list.push_back(Json{{"id", id}, {"keyword", reason}, {"message", refusal}});
      entry["refused"] = refusal;
    }

    // Every instance written and tokenized (also for a refused schema: the peer walks them).
    std::vector<Instance> instances;
    const Json& tests = record["tests"];
    for (size_t i = 0; i < tests.size(); ++i) {
      Instance inst;
      inst.index = static_cast<int>(i);
      inst.valid = tests[i].value("valid", false);
      const Json& data = tests[i]["data"];
      Json written = data;
      inst.serialization = "as_given";
      if (grammar) {
        try {
          written = structured::order_keys_like_grammar(schema, data, schema_options);
          inst.serialization = "grammar_order";
        } catch (const std::exception&) {
          ++totals.serialization_errors;
        }
      }
      inst.text = written.dump(-1, ' ', false, Json::error_handler_t::replace);
      inst.tokens = tok.encode(inst.text, user_text);
      std::string spelled;
      for (int32_t t : inst.tokens) spelled += tok.token_bytes(t);
      if (spelled != inst.text) ++totals.tokenization_mismatches;
      instances.push_back(std::move(inst));
    }

    Json walks = Json::array();
    double schema_mask_us = 0;
    size_t schema_masks = 0;
    for (const Instance& inst : instances) {
      Json w{{"index", inst.index},
             {"valid", inst.valid},
             {"serialization", inst.serialization},
             {"text", text_value(inst.text)},
             {"tokens", inst.tokens}};
      if (!grammar) {
        ++n_not_walked;
        w["ours_accepted"] = nullptr;
        walks.push_back(std::move(w));
        continue;
      }
      const size_t before = totals.mask_us.size();
      const WalkResult r = bench.walk(grammar, id, inst);
      Json walk_mask_us = Json::array();
      for (size_t k = before; k < totals.mask_us.size(); ++k) {
        schema_mask_us += totals.mask_us[k];
        walk_mask_us.push_back(std::round(totals.mask_us[k] * 1000.0) / 1000.0);
      }
      schema_masks += totals.mask_us.size() - before;
      if (walks_out.is_open()) w["mask_us"] = std::move(walk_mask_us);
      w["ours_accepted"] = r.accepted;
      w["ours_rejected_at"] = r.rejected_at;
      if (inst.valid) {
        ++n_valid;
        if (r.accepted) {
          ++n_valid_accepted;
        } else {
          valid_rejected.push_back(diagnose(grammar, tok, id, inst, r));
        }
      } else {
        ++n_invalid;
        if (r.accepted) {
          invalid_accepted.push_back(Json{{"id", id},
                                          {"instance", inst.index},
                                          {"text", text_value(inst.text.substr(0, 300))}});
        } else {
          ++n_invalid_rejected;
        }
      }
      walks.push_back(std::move(w));
    }
    if (schema_masks > 0) {
      entry["masks"] = schema_masks;
      entry["mask_us_mean"] = schema_mask_us / static_cast<double>(schema_masks);
    }
    if (walks_out.is_open()) {
      Json dumped{{"id", id}, {"schema", schema}, {"ours", entry}, {"walks", std::move(walks)}};
      walks_out << dumped.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
    }
    per_schema.push_back(std::move(entry));
    if (grammar && !opts.no_apply) compiled_all.push_back({grammar, std::move(instances)});
  }
  if (walks_out.is_open()) {
    walks_out.flush();
    if (!walks_out) throw Error(Error::Kind::kIo, "--dump-walks: cannot write " + opts.dump_walks);
  }

  if (!opts.no_apply) {
    for (const Compiled& c : compiled_all) {
      for (const Instance& inst : c.instances) bench.walk_apply(c.grammar, inst);
    }
  }

  Json r;
  r["tool"] = "llmserve bench-structured";
  r["model"] = path.filename().string();
  r["corpus"] = corpus_path.string();
  r["cpu"] = cpu_model();
  r["threads"] = 1;
  r["load_average_1m"] = Json{{"start", load_start}, {"end", load_average_1m()}};
  r["vocabulary"] = Json{{"rows", n_rows},
                         {"tokenizer_tokens", tok.n_vocab()},
                         {"text_tokens", n_text},
                         {"never_allowed_rows", bench.n_never_allowed()},
                         {"stop_token_ids", std::vector<int32_t>(index->stop_token_ids().begin(),
                                                                 index->stop_token_ids().end())},
                         {"index_build_ms", index_ms}};
  r["schema_options"] = opts.whitespace == "compact"
                            ? "JsonSchemaOptions{} with compact whitespace (none at all)"
                            : "JsonSchemaOptions{} (flexible whitespace, at most 20 bytes a run)";
  r["compile_limits"] = "CompileLimits{} (1 s, 2,000,000 work units), as the server";
  r["serialization"] = kSerialization;
  Json by_keyword = Json::object();
  for (const auto& [k, n] : refusals) by_keyword[k] = n;
  r["schemas"] = Json{{"total", n_schemas},
                      {"compiled", n_compiled},
                      {"refused", n_refused},
                      {"refusals_by_keyword", std::move(by_keyword)},
                      {"refused_list", std::move(refused_list)}};
  r["compile_ms"] = summarize(totals.compile_ms);
  std::sort(totals.compile_by_schema.rbegin(), totals.compile_by_schema.rend());
  Json slowest = Json::array();
  for (size_t i = 0; i < std::min<size_t>(5, totals.compile_by_schema.size()); ++i) {
    slowest.push_back(Json{{"id", totals.compile_by_schema[i].second},
                           {"ms", totals.compile_by_schema[i].first}});
  }
  r["compile_slowest"] = std::move(slowest);
  r["masks"] = totals.mask_us.size();
  r["tokens_walked"] = totals.tokens_walked;
  r["mask_us"] = summarize(totals.mask_us);
  // Wall time inside fill_mask against the thread's CPU time there: far apart on a busy machine.
  r["mask_total_s"] = Json{{"wall", totals.mask_wall_s}, {"thread_cpu", totals.mask_cpu_s}};
  // The same calls in the thread's CPU time (CLOCK_THREAD_CPUTIME_ID around the steady_clock
  // reads, so each sample carries one clock read more): what other processes cannot inflate.
  r["mask_thread_cpu_us"] = summarize(totals.mask_cpu_us);
  if (!opts.no_apply) {
    Json apply;
    apply["note"] =
        "second pass, caches warm: a plain fill_mask and the server's GrammarConstraint::mask "
        "(fill_mask + -inf into a fresh logits row) at the same point of each walk";
    apply["warm_fill_us"] = summarize(totals.warm_fill_us);
    apply["warm_fill_apply_us"] = summarize(totals.warm_fill_apply_us);
    const double fill = apply["warm_fill_us"].value("mean", 0.0);
    const double both = apply["warm_fill_apply_us"].value("mean", 0.0);
    apply["apply_us_mean"] = both - fill;
    apply["disagreements_with_plain_mask"] = totals.constraint_disagreements;
    r["apply"] = std::move(apply);
  }
  r["valid"] = Json{
      {"total", n_valid}, {"accepted", n_valid_accepted}, {"rejected", std::move(valid_rejected)}};
  r["invalid"] = Json{{"total", n_invalid},
                      {"rejected", n_invalid_rejected},
                      {"accepted_soundness_failures", std::move(invalid_accepted)}};
  r["instances_of_refused_schemas"] = n_not_walked;
  r["checks"] = Json{{"mask_violations", totals.mask_violations},
                     {"mask_violation_examples", std::move(totals.violation_examples)},
                     {"stop_bit_mismatches", totals.stop_mismatches},
                     {"stop_bit_mismatch_examples", std::move(totals.stop_mismatch_examples)},
                     {"accept_refused_allowed_token", totals.accept_refused},
                     {"tokenization_mismatches", totals.tokenization_mismatches},
                     {"serialization_errors", totals.serialization_errors}};
  if (opts.per_schema) r["per_schema"] = std::move(per_schema);

  if (opts.as_json) {
    std::puts(r.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    print_human(r);
  }
  return 0;
}

}  // namespace

void add_bench_structured_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<BenchStructuredOptions>();
  auto* cmd = app.add_subcommand(
      "bench-structured",
      "Structured output over a JSON Schema corpus: compile time, mask time per token, valid "
      "instances accepted and invalid ones rejected, token by token (one thread)");
  cmd->add_option("-m,--model", opts->model, "GGUF file or registered model (default: default)");
  cmd->add_option("--corpus", opts->corpus,
                  "JSONL of {id, schema, tests: [{valid, data}]} (default: "
                  "$LLMS_SHARED_DATA_DIR/jsonschema-corpus.jsonl, else "
                  "/work/shared/data/jsonschema-corpus.jsonl)");
  cmd->add_option("--limit", opts->limit, "Only the first N schemas (0: all)");
  cmd->add_flag("--json", opts->as_json, "Print JSON");
  cmd->add_flag("--no-apply", opts->no_apply,
                "Skip the second pass that times applying masks to a logits row");
  cmd->add_option("--whitespace", opts->whitespace,
                  "Grammar whitespace: flexible (the default options, as the server) or compact");
  cmd->add_flag("--per-schema", opts->per_schema, "Report compile and mask time per schema");
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  // For tools/structured_peer_bench.py: the same vocabulary and token walks for llguidance.
  cmd->add_option("--dump-vocab", opts->dump_vocab, "Write the vocabulary as JSON")->group("");
  cmd->add_option("--dump-walks", opts->dump_walks, "Write every walk as JSONL")->group("");
  cmd->callback([opts, &exit_code] { exit_code = bench_structured(*opts); });
}

}  // namespace llms::cli
