#pragma once

#include <CLI/CLI.hpp>

namespace llms::cli {

// Registers `run`; its callback stores the command's exit status in exit_code.
void add_run_command(CLI::App& app, int& exit_code);

}  // namespace llms::cli
