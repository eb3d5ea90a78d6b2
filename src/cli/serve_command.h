#pragma once

#include <CLI/CLI.hpp>

namespace llms::cli {

// Registers `serve` (the OpenAI-compatible HTTP server); its callback stores the exit status.
void add_serve_command(CLI::App& app, int& exit_code);

}  // namespace llms::cli
