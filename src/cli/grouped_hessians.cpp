// cli/grouped_hessians: see grouped_hessians.h.
#include "grouped_hessians.h"

#include <fmt/core.h>

#include <set>
#include <string_view>
#include <utility>

#include "util/byte_size.h"

namespace llms::cli {

GroupedHessians::GroupedHessians(std::filesystem::path model, CalibrationOptions calibration,
                                 std::vector<quantize::GptqTensor> tensors, uint64_t budget)
    : model_(std::move(model)),
      calibration_(std::move(calibration)),
      tensors_(std::move(tensors)),
      groups_(quantize::group_layers(tensors_, budget)) {}

const quantize::HessianSet::Entry* GroupedHessians::find(const quantize::GptqTensor& tensor) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (tensor.layer < groups_[g].first_layer || tensor.layer > groups_[g].last_layer) continue;
    if (g != current_) gather(g);
    return set_.find(tensor.name);
  }
  return nullptr;
}

void GroupedHessians::gather(size_t group) {
  set_ = {};  // the previous group's memory goes before the next group's is taken
  current_ = SIZE_MAX;
  const quantize::LayerGroup& g = groups_[group];
  std::set<std::string, std::less<>> wanted;
  for (const quantize::GptqTensor& t : tensors_) {
    if (t.layer >= g.first_layer && t.layer <= g.last_layer) wanted.insert(t.name);
  }
  if (groups_.size() > 1) {
    fmt::print(stderr, "[{}] layers {}-{} (group {} of {}): {} of Hessians\n", calibration_.tag,
               g.first_layer, g.last_layer, group + 1, groups_.size(),
               format_bytes(g.hessian_bytes));
  }
  quantize::HessianCollector collector(
      [&wanted](std::string_view weight) { return wanted.contains(weight); });
  // The output head's input exists only where logits are computed: on every row, for its Hessian.
  CalibrationOptions calibration = calibration_;
  calibration.logits_rows = wanted.contains(quantize::kOutputHead);
  const int64_t n_chunks =
      run_calibration(model_, calibration, [&collector](const model::MatmulInput& input) {
        collector.add(input.weight, input.data, input.n_rows, input.n_columns);
      });
  fmt::print(stderr, "[{}] Hessians: {} from {} chunks of {} tokens\n", calibration_.tag,
             format_bytes(collector.bytes()), n_chunks, calibration_.ctx);
  set_ = collector.take();
  if (counted_.size() < groups_.size()) counted_.resize(groups_.size(), false);
  if (!counted_[group]) n_distinct_ += set_.n_distinct();  // a group gathered again counts once
  counted_[group] = true;
  current_ = group;
}

}  // namespace llms::cli
