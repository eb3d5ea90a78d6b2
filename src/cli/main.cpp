// llmserve command-line entry point: one binary, one subcommand per job.
//
// Errors from any command arrive here as llms::Error and become a one-line message and a
// non-zero exit status (2 for bad arguments, 1 for everything else).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "batch_command.h"
#include "bench_attention_command.h"
#include "bench_command.h"
#include "bench_engine_command.h"
#include "bench_model_command.h"
#include "bench_structured_command.h"
#include "bench_tokenizer_command.h"
#include "imatrix_command.h"
#include "inspect_command.h"
#include "perplexity_command.h"
#include "pull_command.h"
#include "quantize_command.h"
#include "run_command.h"
#include "serve_command.h"
#include "tiny_model_command.h"
#include "tokenize_command.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"llmserve: a large-language-model inference server"};
  app.require_subcommand(1);
  int exit_code = 0;
  llms::cli::add_inspect_command(app, exit_code);
  llms::cli::add_pull_command(app, exit_code);
  llms::cli::add_run_command(app, exit_code);
  llms::cli::add_batch_command(app, exit_code);
  llms::cli::add_serve_command(app, exit_code);
  llms::cli::add_bench_engine_command(app, exit_code);
  llms::cli::add_bench_model_command(app, exit_code);
  llms::cli::add_bench_attention_command(app, exit_code);
  llms::cli::add_bench_command(app, exit_code);
  llms::cli::add_bench_tokenizer_command(app, exit_code);
  llms::cli::add_bench_structured_command(app, exit_code);
  llms::cli::add_perplexity_command(app, exit_code);
  llms::cli::add_tokenize_command(app, exit_code);
  llms::cli::add_quantize_command(app, exit_code);
  llms::cli::add_imatrix_command(app, exit_code);
  llms::cli::add_tiny_model_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const llms::Error& e) {
    std::fprintf(stderr, "llmserve: %s\n", e.what());
    return e.kind() == llms::Error::Kind::kInvalidArgument ? 2 : 1;
  } catch (const std::exception& e) {
    // Not one of our errors (out of memory, a filesystem error): still unwind, so destructors
    // (temporary files, threads) run, and say what happened.
    std::fprintf(stderr, "llmserve: unexpected error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
