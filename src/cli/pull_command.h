#pragma once

#include <CLI/CLI.hpp>

namespace llms::cli {

// Registers `pull`, which hands over to scripts/pull_model.py (exec, so its exit status is ours).
void add_pull_command(CLI::App& app, int& exit_code);

}  // namespace llms::cli
