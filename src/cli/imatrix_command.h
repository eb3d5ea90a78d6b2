#pragma once

#include <CLI/CLI.hpp>

namespace llms::cli {

// Registers `imatrix`; its callback stores the command's exit status in exit_code.
void add_imatrix_command(CLI::App& app, int& exit_code);

}  // namespace llms::cli
