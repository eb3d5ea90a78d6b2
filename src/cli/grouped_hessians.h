// cli/grouped_hessians: GPTQ's Hessians gathered a group of layers at a time, so that no more than
// a memory budget of them is held at once (`quantize --method gptq --hessian-memory SIZE`).
//
// quantize/hessian.h's group_layers splits the layers of the tensors GPTQ will quantize into
// consecutive groups whose Hessians fit the budget. When quantize_model asks for a tensor of a
// group not yet gathered, the previous group's Hessians are dropped and a calibration run
// (cli/calibration_run.h) over the whole text sums the new group's, and only theirs. Each run is
// the unquantized model over the same chunks, so every layer's Hessian, and the output file, are
// the same whatever the budget; a smaller budget costs one calibration run per group. The model is
// opened for each run and closed after it, so the quantization that follows holds no runner.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "calibration_run.h"
#include "quantize/hessian.h"

namespace llms::cli {

class GroupedHessians {
 public:
  // Plans the groups (group_layers' refusals: a layer over the budget, no tensor); gathers nothing.
  GroupedHessians(std::filesystem::path model, CalibrationOptions calibration,
                  std::vector<quantize::GptqTensor> tensors, uint64_t budget);

  const std::vector<quantize::LayerGroup>& groups() const { return groups_; }
  // The Hessian of a tensor, gathering its group first when needed (quantize::HessianLookup; asked
  // in layer order, each group is gathered once; asked again from an earlier layer, as awq-gptq
  // does, the groups are gathered again). nullptr for a tensor outside every group.
  const quantize::HessianSet::Entry* find(const quantize::GptqTensor& tensor);
  // Distinct matrices over every group gathered so far.
  size_t n_distinct() const { return n_distinct_; }

 private:
  void gather(size_t group);

  std::filesystem::path model_;
  CalibrationOptions calibration_;
  std::vector<quantize::GptqTensor> tensors_;
  std::vector<quantize::LayerGroup> groups_;
  size_t current_ = SIZE_MAX;  // the group in set_
  quantize::HessianSet set_;
  size_t n_distinct_ = 0;
  std::vector<bool> counted_;  // groups whose matrices n_distinct_ includes
};

}  // namespace llms::cli
