// The OpenAPI 3.1 description of every endpoint, served at /openapi.json.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace rapid::server {

nlohmann::ordered_json openapi_spec(const std::string& model_id);

}  // namespace rapid::server
