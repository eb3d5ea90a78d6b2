#include "kv/kv_groups.h"

#include <algorithm>
#include <map>
#include <string>

#include "util/error.h"

namespace llms::kv {

KvGroupLayout KvGroupLayout::single(int32_t n_layers) {
  const std::vector<int64_t> windows(static_cast<size_t>(std::max(n_layers, 0)), 0);
  return from_windows(windows);
}

KvGroupLayout KvGroupLayout::from_windows(std::span<const int64_t> layer_windows) {
  if (layer_windows.empty()) {
    throw Error(Error::Kind::kInvalidArgument, "KV cache groups: the model has no layers");
  }
  // Layers of each window, in layer order; windows in ascending order (full attention first).
  std::map<int64_t, std::vector<int32_t>> by_window;
  for (size_t l = 0; l < layer_windows.size(); ++l) {
    if (layer_windows[l] < 0) {
      throw Error(Error::Kind::kInvalidArgument,
                  "KV cache groups: layer " + std::to_string(l) + " has a negative window");
    }
    by_window[layer_windows[l]].push_back(static_cast<int32_t>(l));
  }
  KvGroupLayout out;
  out.members_ = static_cast<int32_t>(layer_windows.size());
  for (const auto& [window, layers] : by_window) {
    out.members_ = std::min(out.members_, static_cast<int32_t>(layers.size()));
  }
  out.group_of_.assign(layer_windows.size(), 0);
  out.member_of_.assign(layer_windows.size(), 0);
  for (const auto& [window, layers] : by_window) {
    for (size_t i = 0; i < layers.size(); ++i) {
      if (i % static_cast<size_t>(out.members_) == 0) out.windows_.push_back(window);
      out.group_of_[static_cast<size_t>(layers[i])] = out.n_groups() - 1;
      out.member_of_[static_cast<size_t>(layers[i])] =
          static_cast<int32_t>(i % static_cast<size_t>(out.members_));
    }
  }
  return out;
}

bool KvGroupLayout::has_window() const {
  return std::any_of(windows_.begin(), windows_.end(), [](int64_t w) { return w > 0; });
}

int64_t blocks_for_sequence(std::span<const int64_t> windows, int32_t block_size, int64_t n_tokens,
                            int64_t max_step_tokens) {
  auto blocks = [&](int64_t n) { return (n + block_size - 1) / block_size; };
  const int64_t all = blocks(n_tokens);
  int64_t total = 0;
  for (int64_t w : windows) {
    // A step writing [a, a + step) reads from a - w + 1 on: w - 1 + step positions at most.
    total += w > 0 ? std::min(all, blocks(w - 1 + std::min(max_step_tokens, n_tokens)) + 1) : all;
  }
  return total;
}

}  // namespace llms::kv
