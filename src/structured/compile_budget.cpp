// structured/compile_budget: see compile_budget.h.
#include "structured/compile_budget.h"

#include <algorithm>
#include <limits>
#include <string>

#include "util/error.h"

namespace llms::structured {

CompileBudget::CompileBudget(CompileLimits limits)
    : limits_(limits), start_(std::chrono::steady_clock::now()) {}

void CompileBudget::check(std::string_view what) {
  if (work_ > limits_.max_work) {
    throw Error(Error::Kind::kInvalidArgument, "constraint too complex: " + std::string(what) +
                                                   " exceed the compile budget of " +
                                                   std::to_string(limits_.max_work) + " units");
  }
  if (work_ >= next_clock_check_) {
    next_clock_check_ = work_ + 1024;
    check_time(what);
  }
  const int64_t past_limit = limits_.max_work == std::numeric_limits<int64_t>::max()
                                 ? limits_.max_work
                                 : limits_.max_work + 1;
  next_check_ = std::min(next_clock_check_, past_limit);
}

void CompileBudget::check_time(std::string_view what) {
  const auto elapsed = std::chrono::steady_clock::now() - start_;
  if (elapsed > limits_.max_time) {
    throw Error(Error::Kind::kInvalidArgument,
                "constraint too complex: compiling " + std::string(what) + " took longer than " +
                    std::to_string(limits_.max_time.count()) + " ms");
  }
}

}  // namespace llms::structured
