#include "structured/compile_budget.h"

#include <gtest/gtest.h>

#include <thread>

#include "util/error.h"

namespace llms::structured {
namespace {

TEST(CompileBudget, WorkOverTheLimitThrowsNamingWhat) {
  CompileBudget budget(CompileLimits{std::chrono::milliseconds(60'000), 100});
  budget.charge(60, "regex DFA states");
  EXPECT_EQ(budget.work(), 60);
  try {
    budget.charge(41, "regex DFA states");
    FAIL() << "expected a budget error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("regex DFA states"), std::string::npos) << e.what();
  }
}

TEST(CompileBudget, TimeOverTheLimitThrows) {
  CompileBudget budget(CompileLimits{std::chrono::milliseconds(1), 1'000'000'000});
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // The clock is read on the first charge and every 1024 units after it.
  EXPECT_THROW(budget.charge(1, "grammar rules"), Error);
}

}  // namespace
}  // namespace llms::structured
