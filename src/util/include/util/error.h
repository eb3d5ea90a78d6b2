// util/error: the one exception type llmserve throws for bad input and failed operations.
//
// Contract: every error that reaches a user carries a message that names what is wrong (the key,
// tensor, field or parameter) and a Kind that callers map to exit codes or HTTP statuses.
#pragma once

#include <stdexcept>
#include <string>

namespace llms {

class Error : public std::runtime_error {
 public:
  enum class Kind {
    kInvalidFile,      // a model/data file is malformed or hostile
    kUnsupported,      // well-formed but uses something we do not implement
    kInvalidArgument,  // a caller or user passed a bad value
    kIo,               // the operating system refused (open, mmap, read)
    kNotFound,         // a named thing does not exist
    kUnavailable,      // cannot serve now (shutting down, over capacity); try later
    kInternal,         // a broken invariant of our own (a bug, never the user's fault)
  };

  Error(Kind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}

  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

[[noreturn]] inline void throw_invalid_file(std::string message) {
  throw Error(Error::Kind::kInvalidFile, std::move(message));
}

}  // namespace llms
