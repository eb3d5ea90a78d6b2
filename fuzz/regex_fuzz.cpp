// libFuzzer target for the regex compiler (structured/regex_parser + the automaton back end):
// any pattern is compiled under a small budget and either refused with llms::Error or walked a
// few tokens with the invariants of grammar_fuzz_walk.h checked. Regexes compile to automata, so
// no input may make compilation or matching backtrack or recurse without bound.
// Seeds: fuzz/corpus/regex_fuzz/ (JSON Schema style patterns, refused constructs, deep nesting).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar_fuzz_walk.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llms::structured;
  if (size > 4096) return 0;
  const std::string_view pattern(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<const CompiledGrammar> grammar;
  try {
    grammar = compile_regex(pattern, fuzzing::fuzz_index(), fuzzing::fuzz_limits());
  } catch (const llms::Error& e) {
    fuzzing::check(e.kind() == llms::Error::Kind::kInvalidArgument);
    return 0;
  }
  fuzzing::walk(grammar, data, size, 8);
  return 0;
}
