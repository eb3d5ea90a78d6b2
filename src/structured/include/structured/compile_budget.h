// structured/compile_budget: how much compiling one constraint may cost.
//
// Schemas, regexes and grammars come from requests, so a hostile one must not hang or starve the
// server: every compiler charges its work (NFA states, grammar rules, expanded repetitions,
// analysis steps) to a budget and stops with a clear error as soon as the work or the wall time
// is over. The error is llms::Error(kInvalidArgument), so the server answers 400 naming what was
// too large. The automaton built on demand after compiling has a work limit of its own, taken
// from the same CompileLimits (dfa.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace llms::structured {

struct CompileLimits {
  std::chrono::milliseconds max_time{1000};  // wall time for one compilation
  int64_t max_work = 2'000'000;              // states + rules + expansions, summed
};

class CompileBudget {
 public:
  explicit CompileBudget(CompileLimits limits = {});

  // Adds `units` of work; throws llms::Error(kInvalidArgument) naming `what` (e.g. "NFA
  // states") when the work or the time limit is exceeded. The clock is read every 1024 units
  // charged, and the common case is an add and a compare inline: token walks charge every trie
  // node they visit.
  void charge(int64_t units, std::string_view what) {
    work_ += units;
    if (work_ >= next_check_) [[unlikely]]
      check(what);
  }

  int64_t work() const { return work_; }
  // Wall time since the budget was made (the compilation's own time so far).
  std::chrono::steady_clock::duration elapsed() const {
    return std::chrono::steady_clock::now() - start_;
  }
  const CompileLimits& limits() const { return limits_; }

 private:
  void check(std::string_view what);  // the work limit, and the clock every 1024 units
  void check_time(std::string_view what);

  CompileLimits limits_;
  std::chrono::steady_clock::time_point start_;
  int64_t work_ = 0;
  int64_t next_clock_check_ = 0;
  int64_t next_check_ = 0;  // the least work at which check() has something to do
};

}  // namespace llms::structured
