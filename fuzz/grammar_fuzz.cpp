// libFuzzer target for the GBNF grammar parser and compiler (structured/grammar_parser + the
// automaton back end + the Earley matcher): any text is compiled under a small budget and either
// refused with llms::Error or walked a few tokens with the invariants of grammar_fuzz_walk.h
// checked. Deep nesting, huge repetitions, recursion of every kind (left, nullable, mutual) must
// end in an error or a bounded walk, never a crash, a hang or a stack overflow.
// Seeds: fuzz/corpus/grammar_fuzz/ (a JSON grammar, left recursion, regex terminals, counted
// repetitions, errors).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar_fuzz_walk.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llms::structured;
  if (size > 8192) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<const CompiledGrammar> grammar;
  try {
    grammar = compile_grammar(text, fuzzing::fuzz_index(), fuzzing::fuzz_limits());
  } catch (const llms::Error& e) {
    fuzzing::check(e.kind() == llms::Error::Kind::kInvalidArgument);
    return 0;
  }
  fuzzing::walk(grammar, data, size, 8);
  return 0;
}
