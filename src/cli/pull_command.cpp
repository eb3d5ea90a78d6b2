// `llmserve pull NAME`: fetch a registered model into the cache (wraps scripts/pull_model.py).
#include "pull_command.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "model_registry.h"

namespace llms::cli {

namespace {

struct PullOptions {
  std::string name;
  std::string cache_dir;
  bool list = false;
  bool all = false;
  bool force = false;
};

int run_pull(const PullOptions& opts) {
  std::vector<std::string> args = {"python3", pull_script_path().string()};
  if (!opts.name.empty()) args.push_back(opts.name);
  if (!opts.cache_dir.empty()) args.insert(args.end(), {"--cache-dir", opts.cache_dir});
  if (opts.list) args.push_back("--list");
  if (opts.all) args.push_back("--all");
  if (opts.force) args.push_back("--force");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execvp("python3", argv.data());
  std::perror("llmserve pull: cannot run python3");
  return 1;
}

}  // namespace

void add_pull_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<PullOptions>();
  auto* cmd = app.add_subcommand("pull", "Download a registered model, join its parts, verify it");
  cmd->add_option("name", opts->name, "Registered model name or alias ('default')");
  cmd->add_option("--cache-dir", opts->cache_dir,
                  "Cache root (default $LLMSERVE_CACHE or ~/.cache/llmserve)");
  cmd->add_flag("--list", opts->list, "List registered models");
  cmd->add_flag("--all", opts->all, "Pull every registered model");
  cmd->add_flag("--force", opts->force, "Download again even when cached");
  cmd->callback([opts, &exit_code] { exit_code = run_pull(*opts); });
}

}  // namespace llms::cli
