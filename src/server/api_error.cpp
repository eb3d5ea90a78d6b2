// server/api_error: OpenAI-shaped error bodies (see api_error.h).
#include "server/api_error.h"

namespace llms::server {

ApiError::ApiError(int status, std::string message, std::string param, std::string code,
                   std::string type)
    : std::runtime_error(std::move(message)),
      status_(status),
      param_(std::move(param)),
      code_(std::move(code)),
      type_(type.empty() ? error_type_for_status(status) : std::move(type)) {}

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", what()},
                      {"type", type_},
                      {"param", param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_)},
                      {"code", code_.empty() ? nlohmann::json(nullptr) : nlohmann::json(code_)}};
  return {{"error", std::move(e)}};
}

void throw_invalid(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param);
}

const char* error_type_for_status(int status) {
  switch (status) {
    case 400:
    case 413:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 405:
      return "invalid_request_error";
    case 408:
      return "timeout_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

nlohmann::json error_body(int status, const std::string& message, const std::string& param,
                          const std::string& code) {
  return ApiError(status, message, param, code).to_json();
}

}  // namespace llms::server
