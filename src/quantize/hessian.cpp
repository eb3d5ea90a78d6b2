// quantize/hessian: see hessian.h.
#include "quantize/hessian.h"

#include <climits>
#include <set>
#include <utility>

#include "lapack.h"
#include "util/byte_size.h"
#include "util/error.h"

namespace llms::quantize {

const HessianSet::Entry* HessianSet::find(std::string_view weight) const {
  const auto it = by_weight.find(weight);
  return it == by_weight.end() ? nullptr : it->second.get();
}

size_t HessianSet::n_distinct() const {
  std::set<const Entry*> seen;
  for (const auto& [name, entry] : by_weight) seen.insert(entry.get());
  return seen.size();
}

// Weights that may read one input: a layer's q, k and v; its gate and up. Anything else has a
// key of its own (so even a buffer the forward pass reuses is never taken for a shared input).
std::string hessian_input_key(std::string_view weight) {
  const size_t dot = weight.find('.', 4);  // "blk.N."
  if (dot == std::string_view::npos) return std::string(weight);
  const std::string_view layer = weight.substr(0, dot);
  const std::string_view rest = weight.substr(dot + 1);
  if (rest == "attn_q.weight" || rest == "attn_k.weight" || rest == "attn_v.weight") {
    return std::string(layer) + ".attn_input";
  }
  if (rest == "ffn_gate.weight" || rest == "ffn_up.weight") {
    return std::string(layer) + ".ffn_input";
  }
  return std::string(weight);
}

uint64_t hessian_bytes(std::span<const GptqTensor> tensors) {
  std::set<std::string> inputs;
  uint64_t total = 0;
  for (const GptqTensor& t : tensors) {
    if (!inputs.insert(hessian_input_key(t.name)).second) continue;
    total +=
        static_cast<uint64_t>(t.n_columns) * static_cast<uint64_t>(t.n_columns) * sizeof(float);
  }
  return total;
}

std::vector<LayerGroup> group_layers(std::span<const GptqTensor> tensors, uint64_t budget) {
  // Each layer's bytes, layers in order.
  std::map<int64_t, std::vector<GptqTensor>> by_layer;
  for (const GptqTensor& t : tensors) by_layer[t.layer].push_back(t);
  std::vector<LayerGroup> groups;
  for (const auto& [layer, layer_tensors] : by_layer) {
    const uint64_t bytes = hessian_bytes(layer_tensors);
    if (bytes > budget) {
      throw Error(Error::Kind::kInvalidArgument, "GPTQ: layer " + std::to_string(layer) +
                                                     "'s Hessians take " + format_bytes(bytes) +
                                                     ", more than the budget of " +
                                                     format_bytes(budget) + " (--hessian-memory)");
    }
    if (groups.empty() || groups.back().hessian_bytes + bytes > budget) {
      groups.push_back(LayerGroup{layer, layer, 0});
    }
    groups.back().last_layer = layer;
    groups.back().hessian_bytes += bytes;
  }
  return groups;
}

HessianCollector::HessianCollector(std::function<bool(std::string_view weight)> wanted)
    : wanted_(std::move(wanted)) {}

bool HessianCollector::accepts(std::string_view weight, int64_t n_rows) const {
  return n_rows >= kMinRows && (weight.substr(0, 4) == "blk." || weight == kOutputHead) &&
         (!wanted_ || wanted_(weight));
}

void HessianCollector::add(std::string_view weight, const float* rows, int64_t n_rows,
                           int64_t n_columns) {
  if (!accepts(weight, n_rows)) return;
  if (n_columns < 1 || n_columns > INT_MAX || n_rows > INT_MAX) {
    throw Error(Error::Kind::kInvalidArgument,
                "Hessian of '" + std::string(weight) + "': unsupported shape");
  }
  const std::string key = hessian_input_key(weight);
  // The input summed last, told again for a sibling weight. A weight told a second time since
  // that sum is a new forward step (the next calibration chunk reuses the same buffer), even
  // when the filter lets only that weight through.
  const bool same_input = has_last_ && rows == last_data_ && n_rows == last_rows_ &&
                          n_columns == last_columns_ && key == last_key_ &&
                          !told_since_sum_.contains(weight);
  if (same_input) told_since_sum_.emplace(weight);
  auto it = group_of_.find(weight);
  if (it == group_of_.end()) {
    // First sight: share the previous weight's matrix when it read this same input.
    size_t group = last_group_;
    if (!same_input) {
      groups_.push_back(std::make_shared<Group>());
      groups_.back()->n_columns = n_columns;
      groups_.back()->h.assign(static_cast<size_t>(n_columns * n_columns), 0.0f);
      group = groups_.size() - 1;
    }
    it = group_of_.emplace(std::string(weight), group).first;
    if (same_input) return;  // summed already, by the weight it shares with
  } else if (same_input && it->second == last_group_) {
    return;
  }
  Group& g = *groups_[it->second];
  if (g.n_columns != n_columns) {
    throw Error(Error::Kind::kInvalidArgument, "Hessian of '" + std::string(weight) +
                                                   "': seen with " + std::to_string(g.n_columns) +
                                                   " columns, now " + std::to_string(n_columns));
  }
  // Row-major rows (n_rows x n) are, column-major, A = X^T (n x n_rows); H += A A^T.
  const int n = static_cast<int>(n_columns);
  const int k = static_cast<int>(n_rows);
  const float one = 1.0f;
  ssyrk_("U", "N", &n, &k, &one, rows, &n, &one, g.h.data(), &n, 1, 1);
  g.n_rows += n_rows;
  last_data_ = rows;
  last_rows_ = n_rows;
  last_columns_ = n_columns;
  last_group_ = it->second;
  last_key_ = key;
  has_last_ = true;
  told_since_sum_.clear();
  told_since_sum_.emplace(weight);
}

HessianSet HessianCollector::take() {
  std::vector<std::shared_ptr<const HessianSet::Entry>> entries;
  entries.reserve(groups_.size());
  for (const std::shared_ptr<Group>& g : groups_) {
    auto e = std::make_shared<HessianSet::Entry>();
    e->n_columns = g->n_columns;
    e->n_rows = g->n_rows;
    e->h = std::move(g->h);
    // ssyrk filled the column-major upper triangle: row-major, the lower one. Mirror it.
    const auto n = static_cast<size_t>(g->n_columns);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) e->h[i * n + j] = e->h[j * n + i];
    }
    entries.push_back(std::move(e));
  }
  HessianSet set;
  for (const auto& [name, group] : group_of_) set.by_weight.emplace(name, entries[group]);
  groups_.clear();
  group_of_.clear();
  has_last_ = false;
  told_since_sum_.clear();
  return set;
}

uint64_t HessianCollector::bytes() const {
  uint64_t total = 0;
  for (const auto& g : groups_) total += g->h.size() * sizeof(float);
  return total;
}

}  // namespace llms::quantize
