// llmserve command-line entry point: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <cstdio>

int main(int argc, char** argv) {
  CLI::App app{"llmserve: a large-language-model inference server"};
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  if (app.get_subcommands().empty()) {
    std::puts(app.help().c_str());
  }
  return 0;
}
