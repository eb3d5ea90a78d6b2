#include "kv/kv_groups.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "util/error.h"

namespace llms::kv {

KvGroupLayout KvGroupLayout::single(int32_t n_layers) {
  const std::vector<int64_t> windows(static_cast<size_t>(std::max(n_layers, 0)), 0);
  return from_windows(windows);
}

KvGroupLayout KvGroupLayout::from_windows(std::span<const int64_t> layer_windows,
                                          std::span<const int64_t> layer_sinks) {
  auto fail = [](const std::string& what) {
    throw Error(Error::Kind::kInvalidArgument, "KV cache groups: " + what);
  };
  if (layer_windows.empty()) fail("the model has no layers");
  if (!layer_sinks.empty() && layer_sinks.size() != layer_windows.size()) {
    fail("sinks for " + std::to_string(layer_sinks.size()) + " of " +
         std::to_string(layer_windows.size()) + " layers");
  }
  // Layers of each (window, sinks), in layer order; full attention first.
  std::map<std::pair<int64_t, int64_t>, std::vector<int32_t>> by_kind;
  for (size_t l = 0; l < layer_windows.size(); ++l) {
    const int64_t sinks = layer_sinks.empty() ? 0 : layer_sinks[l];
    if (layer_windows[l] < 0) fail("layer " + std::to_string(l) + " has a negative window");
    if (sinks < 0) fail("layer " + std::to_string(l) + " has a negative sink count");
    if (sinks > 0 && layer_windows[l] == 0) {
      fail("layer " + std::to_string(l) + " has attention sinks but no window");
    }
    by_kind[{layer_windows[l], sinks}].push_back(static_cast<int32_t>(l));
  }
  KvGroupLayout out;
  out.members_ = static_cast<int32_t>(layer_windows.size());
  for (const auto& [kind, layers] : by_kind) {
    out.members_ = std::min(out.members_, static_cast<int32_t>(layers.size()));
  }
  out.group_of_.assign(layer_windows.size(), 0);
  out.member_of_.assign(layer_windows.size(), 0);
  for (const auto& [kind, layers] : by_kind) {
    for (size_t i = 0; i < layers.size(); ++i) {
      if (i % static_cast<size_t>(out.members_) == 0) {
        out.windows_.push_back(kind.first);
        out.sinks_.push_back(kind.second);
      }
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

int64_t blocks_for_sequence(std::span<const int64_t> windows, std::span<const int64_t> sinks,
                            int32_t block_size, int64_t n_tokens, int64_t max_step_tokens) {
  auto blocks = [&](int64_t n) { return (n + block_size - 1) / block_size; };
  const int64_t all = blocks(n_tokens);
  int64_t total = 0;
  for (size_t g = 0; g < windows.size(); ++g) {
    const int64_t w = windows[g];
    const int64_t sink_blocks = sinks.empty() ? 0 : blocks(sinks[g]);
    // A step writing [a, a + step) reads from a - w + 1 on (w - 1 + step positions at most,
    // which can straddle one more block than they fill) and the sinks' blocks.
    const int64_t step = std::min(max_step_tokens, n_tokens);
    total += w > 0 ? std::min(all, sink_blocks + blocks(w - 1 + step) + 1) : all;
  }
  return total;
}

}  // namespace llms::kv
