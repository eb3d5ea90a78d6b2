// server/api_error: the one error a request handler throws, carrying everything the OpenAI error
// body needs: {"error": {"message", "type", "param", "code"}} and the HTTP status.
//
// Contract: `param` names the request field at fault (empty: none, rendered as null); `code` is
// OpenAI's machine-readable code when one exists ("context_length_exceeded", "model_not_found").
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace llms::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {},
           std::string type = {});

  int status() const noexcept { return status_; }
  const std::string& param() const noexcept { return param_; }
  const std::string& code() const noexcept { return code_; }
  const std::string& type() const noexcept { return type_; }

  nlohmann::json to_json() const;

 private:
  int status_;
  std::string param_;
  std::string code_;
  std::string type_;
};

// 400 invalid_request_error naming `param`.
[[noreturn]] void throw_invalid(const std::string& param, const std::string& message);

// OpenAI's error type for a status: 400 invalid_request_error, 401 authentication_error,
// 404 not_found_error, 429 rate_limit_error, 5xx server_error, ...
const char* error_type_for_status(int status);

// {"error": {...}} for a status and message (for errors not raised as ApiError).
nlohmann::json error_body(int status, const std::string& message, const std::string& param = {},
                          const std::string& code = {});

}  // namespace llms::server
