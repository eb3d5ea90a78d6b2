// `llmserve batch -m MODEL --input in.jsonl --output out.jsonl`: the offline API.
//
// Like vLLM's LLM.generate: every input line is one request (a prompt string, prompt token ids,
// or chat messages rendered through the model's template, with its own sampling parameters and
// n); all are handed to the engine at once and run with continuous batching; results are
// written in input order. A line that cannot be parsed or is refused gets an error object on
// its output line, and the others still run. Progress goes to stderr, then a throughput summary
// (also as JSON with --summary-json).
#include "batch_command.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "model_registry.h"
#include "server/api_error.h"
#include "server/constraint_compiler.h"
#include "server/json_body.h"
#include "server/openai_request.h"
#include "server/request_constraint.h"
#include "server/tool_calls.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace llms::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BatchOptions {
  std::string model = "default";
  std::string cache_dir;
  std::string input;
  std::string output;
  std::string summary_json;
  bool progress = true;  // only on a terminal
  EngineOptions engine;
};

struct SampleResult {
  std::string text;
  std::vector<int32_t> token_ids;
  json logprobs = nullptr;
  std::string finish_reason;
  std::string stop_reason;
  std::string error;  // finish_reason "error": what failed
};

struct LineResult {
  json id = nullptr;  // the line's "id" field, echoed
  std::optional<std::string> error;
  int32_t n_prompt = 0;
  std::vector<SampleResult> samples;
  bool want_logprobs = false;
  engine::RequestMetrics metrics;
  bool done = false;
};

// max_tokens when a line gives none (vLLM's SamplingParams default).
constexpr int32_t kDefaultMaxTokens = 16;

// One input line into an engine request. The fields are checked by the server's OpenAI parsers
// (server/openai_request.h: completions for `prompt` / `prompt_token_ids`, chat for `messages`),
// so a line is accepted or refused exactly as the same body would be over HTTP, before anything
// is sized from it. Throws llms::Error naming the field.
// Structured output and forced tool calls are compiled as `serve` compiles them.
struct LineContext {
  const gguf::GgufFile& file;
  const tokenizer::Tokenizer& tok;
  server::ConstraintCompiler& constraints;
  server::ToolCallFormat tool_format;
};

engine::GenerationRequest parse_line(json line, std::string_view text, const LineContext& ctx) {
  const gguf::GgufFile& file = ctx.file;
  const tokenizer::Tokenizer& tok = ctx.tok;
  if (!line.is_object()) {
    throw Error(Error::Kind::kInvalidArgument, "each line must be a JSON object");
  }
  // vLLM's offline name for a prompt given as token ids: the completions prompt's id form.
  const auto ids = line.find("prompt_token_ids");
  const bool ids_given = ids != line.end();
  if (ids_given) {
    if (line.contains("prompt")) {
      throw Error(Error::Kind::kInvalidArgument,
                  "prompt_token_ids: give prompt or prompt_token_ids, not both");
    }
    const bool flat = ids->is_array() && std::none_of(ids->begin(), ids->end(),
                                                      [](const json& v) { return v.is_array(); });
    if (!flat) {  // one prompt per line: a list of lists would be several
      throw Error(Error::Kind::kInvalidArgument, "prompt_token_ids: must be a list of token ids");
    }
    json moved = std::move(*ids);
    line.erase("prompt_token_ids");
    line["prompt"] = std::move(moved);
  }
  const bool chat = line.contains("messages");
  server::ParseLimits limits;
  limits.n_vocab = tok.n_vocab();
  limits.max_n = engine::kMaxSamplesPerRequest;  // the engine's cap, above the server's
  server::OpenAiRequest r;
  try {
    r = chat ? server::parse_chat_request(line, limits)
             : server::parse_completion_request(line, limits);
  } catch (const server::ApiError& e) {
    std::string message = e.what();
    if (ids_given && e.param() == "prompt" && message.starts_with("prompt:")) {
      message.replace(0, 6, "prompt_token_ids");  // name the field as the line gave it
    }
    throw Error(Error::Kind::kInvalidArgument, message);
  }
  std::shared_ptr<const sampling::TokenConstraintFactory> constraint;
  try {
    constraint = server::request_constraint(r, text, &ctx.constraints, ctx.tool_format);
  } catch (const server::ApiError& e) {
    throw Error(Error::Kind::kInvalidArgument, e.what());
  }
  std::vector<int32_t> prompt;
  if (chat) {
    jinja::ChatInputs inputs;
    inputs.messages = nlohmann::ordered_json::parse(server::dump_json(r.messages));
    if (!r.tools.is_null())
      inputs.tools = nlohmann::ordered_json::parse(server::dump_json(r.tools));
    inputs.add_generation_prompt = r.add_generation_prompt;
    prompt = tokenizer::encode_chat(file, tok, std::move(inputs)).ids;
  } else {
    if (r.prompts.size() != 1) {
      throw Error(Error::Kind::kInvalidArgument,
                  "prompt: one prompt per line (put each prompt of a list on its own line)");
    }
    const server::PromptInput& in = r.prompts.front();
    prompt =
        in.is_ids ? in.ids : tok.encode(in.text, {.add_special = true, .parse_special = false});
  }
  engine::GenerationRequest g =
      server::generation_request(r, std::move(prompt), r.max_tokens.value_or(kDefaultMaxTokens));
  g.constraint = std::move(constraint);
  return g;
}

json sample_json(const SampleResult& s, size_t index) {
  json j = {{"index", index},
            {"text", s.text},
            {"token_ids", s.token_ids},
            {"finish_reason", s.finish_reason},
            {"stop_reason", s.stop_reason.empty() ? json(nullptr) : json(s.stop_reason)}};
  if (!s.logprobs.is_null()) j["logprobs"] = s.logprobs;
  if (!s.error.empty()) j["error"] = s.error;
  return j;
}

json metrics_json(const engine::RequestMetrics& m) {
  return {{"queue_time", m.queue_time},
          {"time_to_first_token", m.time_to_first_token},
          {"prefill_time", m.prefill_time},
          {"decode_time", m.decode_time},
          {"e2e_time", m.e2e_time},
          {"prompt_tokens", m.n_prompt_tokens},
          {"cached_tokens", m.n_cached_tokens},
          {"generated_tokens", m.n_generated_tokens},
          {"preemptions", m.n_preemptions}};
}

void print_progress(size_t done, size_t total, double elapsed, int64_t generated) {
  const int width = 30;
  const int filled = total ? static_cast<int>(width * done / total) : width;
  fmt::print(stderr, "\r[{}{}] {}/{} requests  {:.1f} s  {:.1f} gen tok/s",
             std::string(filled, '#'), std::string(width - filled, '.'), done, total, elapsed,
             elapsed > 0 ? generated / elapsed : 0.0);
  std::fflush(stderr);
}

int run_batch(const BatchOptions& opts) {
  std::ifstream in(opts.input);
  if (!in) throw Error(Error::Kind::kIo, fmt::format("{}: cannot open", opts.input));
  std::ofstream out(opts.output);
  if (!out) throw Error(Error::Kind::kIo, fmt::format("{}: cannot write", opts.output));

  auto path = resolve_model(opts.model, opts.cache_dir);
  gguf::GgufFile file = gguf::GgufFile::open(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  engine::EngineConfig config = opts.engine.to_config();
  const auto draft = open_draft_model(opts.engine.speculative, opts.cache_dir);
  config.draft_file = draft.get();
  engine::Engine eng(file, tok, config);
  server::ConstraintCompiler constraints(tok, eng.n_vocab());
  const LineContext context{
      file, tok, constraints,
      server::tool_call_format_for_template(tokenizer::chat_template_for(file))};
  const bool progress = opts.progress && isatty(fileno(stderr));
  print_kv_pool(eng, stderr);

  std::vector<LineResult> results;
  std::string text;
  while (std::getline(in, text)) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    LineResult& lr = results.emplace_back();
    try {
      json line = json::parse(text);
      if (line.is_object() && line.contains("id")) lr.id = line["id"];
      engine::GenerationRequest req = parse_line(std::move(line), text, context);
      lr.n_prompt = static_cast<int32_t>(req.prompt.size());
      lr.want_logprobs = req.sampling.logprobs;
      lr.samples.resize(static_cast<size_t>(std::max(req.n, 1)));
      const size_t slot = results.size() - 1;
      eng.add_request(std::move(req), [&results, slot](const engine::RequestOutput& o) {
        LineResult& r = results[slot];
        SampleResult& s = r.samples.at(static_cast<size_t>(o.index));
        s.text += o.text;
        for (const auto& t : o.tokens) {
          s.token_ids.push_back(t.id);
          if (r.want_logprobs) {
            if (s.logprobs.is_null()) s.logprobs = json::array();
            json top = json::array();
            for (const auto& alt : t.top_logprobs)
              top.push_back({{"id", alt.token}, {"logprob", alt.logprob}});
            s.logprobs.push_back({{"id", t.id}, {"logprob", t.logprob}, {"top_logprobs", top}});
          }
        }
        if (o.finished) {
          s.finish_reason = engine::finish_reason_name(o.finish_reason);
          s.stop_reason = o.stop_reason;
          s.error = o.error;
        }
        if (o.request_finished) {
          r.metrics = o.metrics;
          r.done = true;
        }
      });
    } catch (const nlohmann::json::exception& e) {
      lr.error = fmt::format("line {}: invalid JSON: {}", results.size(), e.what());
    } catch (const Error& e) {
      lr.error = fmt::format("line {}: {}", results.size(), e.what());
    }
  }

  auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  size_t n_done = 0;
  for (const auto& r : results) n_done += r.error ? 1 : 0;
  double last_print = -1.0;
  while (eng.has_unfinished()) {
    eng.step();
    if (progress && elapsed() - last_print > 0.25) {
      size_t done = 0;
      for (const auto& r : results) done += (r.error || r.done) ? 1 : 0;
      print_progress(done, results.size(), elapsed(), eng.stats().generation_tokens_total);
      last_print = elapsed();
    }
  }
  const double wall = elapsed();
  const engine::EngineStats stats = eng.stats();
  if (opts.progress)
    print_progress(results.size(), results.size(), wall, stats.generation_tokens_total);
  (void)n_done;

  size_t n_errors = 0;
  int64_t n_prompt = 0;
  int64_t n_gen = 0;
  for (const LineResult& r : results) {
    json j = {{"id", r.id}};
    if (r.error) {
      ++n_errors;
      j["error"] = {{"message", *r.error}, {"type", "invalid_request_error"}};
    } else {
      json outs = json::array();
      for (size_t i = 0; i < r.samples.size(); ++i) outs.push_back(sample_json(r.samples[i], i));
      j["outputs"] = std::move(outs);
      j["prompt_tokens"] = r.n_prompt;
      j["metrics"] = metrics_json(r.metrics);
      n_prompt += r.n_prompt;
      n_gen += r.metrics.n_generated_tokens;
    }
    out << j.dump() << '\n';
  }
  json summary = {
      {"requests", results.size()},
      {"errors", n_errors},
      {"elapsed_s", wall},
      {"prompt_tokens", n_prompt},
      {"generated_tokens", n_gen},
      {"requests_per_s", wall > 0 ? static_cast<double>(results.size() - n_errors) / wall : 0.0},
      {"prompt_tokens_per_s", wall > 0 ? static_cast<double>(n_prompt) / wall : 0.0},
      {"generation_tokens_per_s", wall > 0 ? static_cast<double>(n_gen) / wall : 0.0},
      {"prefix_cache_hit_rate",
       stats.prefix_queries > 0
           ? static_cast<double>(stats.prefix_hits) / static_cast<double>(stats.prefix_queries)
           : 0.0},
      {"preemptions", stats.n_preemptions},
      {"steps", stats.n_steps}};
  fmt::print(stderr,
             "\n[llmserve batch] {} requests ({} refused) in {:.2f} s: {:.2f} req/s, prompt {:.1f} "
             "tok/s, generation {:.1f} tok/s, prefix-cache hits {:.1f} %, {} preemptions\n",
             results.size(), n_errors, wall, summary["requests_per_s"].get<double>(),
             summary["prompt_tokens_per_s"].get<double>(),
             summary["generation_tokens_per_s"].get<double>(),
             100.0 * summary["prefix_cache_hit_rate"].get<double>(), stats.n_preemptions);
  if (!opts.summary_json.empty()) {
    std::ofstream(opts.summary_json) << summary.dump(2) << '\n';
  }
  return 0;  // refused lines are reported on their own output line
}

}  // namespace

void add_batch_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<BatchOptions>();
  auto* cmd =
      app.add_subcommand("batch", "Run a JSONL file of requests offline with continuous batching");
  cmd->add_option("-m,--model", opts->model, "GGUF file or registered model (default: default)");
  cmd->add_option("--input", opts->input, "Input JSONL: one request per line")->required();
  cmd->add_option("--output", opts->output, "Output JSONL: one result per line, input order")
      ->required();
  cmd->add_option("--summary-json", opts->summary_json, "Also write the throughput summary here");
  cmd->add_flag("!--no-progress", opts->progress, "No progress bar");
  cmd->add_option("--cache-dir", opts->cache_dir, "Cache root for registered models");
  add_engine_options(*cmd, opts->engine);
  cmd->callback([opts, &exit_code] { exit_code = run_batch(*opts); });
}

}  // namespace llms::cli
