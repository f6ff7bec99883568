#include "server/sampling_options.h"

#include <cstdlib>

#include "server/api_error.h"

namespace rapid::server {

std::vector<std::string> parse_stop(const json& body, const char* name) {
  std::vector<std::string> out;
  const json* v = field(body, name);
  if (!v) return out;
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) throw bad_request(std::string("'") + name + "' must be a string or an array of strings", name);
  if (v->size() > 64) throw bad_request(std::string("'") + name + "' has more than 64 entries", name);
  for (auto& s : *v) {
    if (!s.is_string()) throw bad_request(std::string("'") + name + "' entries must be strings", name);
    if (!s.get_ref<const std::string&>().empty()) out.push_back(s.get<std::string>());
  }
  return out;
}

engine::GenerationRequest parse_sampling(const json& body, const SamplingLimits& limits,
                                 const char* max_tokens_field) {
  engine::GenerationRequest g;
  engine::SamplingParams& s = g.sampling;
  if (auto v = opt_number(body, "temperature", 0.0, 2.0)) s.temperature = *v;
  if (auto v = opt_number(body, "top_p", 0.0, 1.0)) {
    if (*v <= 0.0) throw bad_request("'top_p' must be greater than 0", "top_p");
    s.top_p = *v;
  }
  if (auto v = opt_int(body, "top_k", -1, 1 << 30)) s.top_k = *v < 0 ? 0 : int(*v);
  if (auto v = opt_number(body, "min_p", 0.0, 1.0)) s.min_p = *v;
  if (auto v = opt_number(body, "presence_penalty", -2.0, 2.0)) s.presence_penalty = *v;
  if (auto v = opt_number(body, "frequency_penalty", -2.0, 2.0)) s.frequency_penalty = *v;
  if (auto v = opt_number(body, "repetition_penalty", 0.0, 10.0)) {
    if (*v <= 0.0) throw bad_request("'repetition_penalty' must be greater than 0", "repetition_penalty");
    s.repetition_penalty = *v;
  }
  if (auto v = opt_int(body, "seed", INT64_MIN, INT64_MAX)) s.seed = uint64_t(*v);
  if (const json* lb = opt_object(body, "logit_bias")) {
    for (auto& [key, val] : lb->items()) {
      char* end = nullptr;
      long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || (limits.vocab_size > 0 && id >= limits.vocab_size))
        throw bad_request("'logit_bias' key '" + key + "' is not a token id of this model", "logit_bias");
      if (!val.is_number() || val.get<double>() < -100.0 || val.get<double>() > 100.0)
        throw bad_request("'logit_bias' values must be numbers between -100 and 100", "logit_bias");
      s.logit_bias[int32_t(id)] = val.get<float>();
    }
  }
  g.stop = parse_stop(body, "stop");
  if (auto v = opt_bool(body, "ignore_eos")) g.ignore_eos = *v;
  if (auto v = opt_int(body, "min_tokens", 0, 1 << 30)) g.min_tokens = *v;
  std::optional<int64_t> mt = opt_int(body, max_tokens_field, 1, 1 << 30);
  if (!mt && std::string(max_tokens_field) != "max_tokens") mt = opt_int(body, "max_tokens", 1, 1 << 30);
  g.max_tokens = mt ? *mt : limits.default_max_tokens;  // 0 → filled from the context later
  if (auto v = opt_array(body, "stop_token_ids")) {
    for (auto& t : *v) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          (limits.vocab_size > 0 && t.get<int64_t>() >= limits.vocab_size))
        throw bad_request("'stop_token_ids' entries must be token ids of this model", "stop_token_ids");
      g.stop_token_ids.push_back(t.get<int32_t>());
    }
  }
  return g;
}

}  // namespace rapid::server
