// tests/support/model_dir: where the model tests find downloaded model files.
//
// $LLMS_MODEL_DIR, else the cache of `scripts/pull_model.py`: $LLMSERVE_CACHE/models, else
// ~/.cache/llmserve/models. A test whose file is missing there skips (it never downloads).
#pragma once

#include <filesystem>

namespace llms::testing {

std::filesystem::path model_dir();

}  // namespace llms::testing
