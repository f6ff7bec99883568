// Choosing parsers from what a model's chat template writes for an assistant turn with tool calls
// (the emitting side), falling back to the model type from config.json.
#include <utility>

#include "parsers/output_parser.h"

namespace rapid::parsers {

namespace {
bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

std::string lower(std::string s) {
  for (auto& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}
}  // namespace

std::string detect_tool_parser(const std::string& t, const std::string& model_type) {
  // Most specific markers first: several formats share "<tool_call>".
  if (has(t, "<|channel|>") && has(t, "<|call|>")) return "gpt_oss";
  if (has(t, "<minimax:tool_call>")) return "minimax_m2";
  if (has(t, "<seed:tool_call>")) return "seed_oss";
  if (has(t, "DSML")) return "deepseek_v32";
  if (has(t, "<steptml:invoke")) return "step3";
  if (has(t, "tool▁calls▁begin")) {
    if (has(t, "```json")) return "deepseek_v3";
    return "deepseek_v31";
  }
  if (has(t, "<|tool_calls_section_begin|>")) return "kimi_k2";
  if (has(t, "<arg_key>")) return "glm45";
  if (has(t, "<function=") && has(t, "<parameter=")) return "qwen3_coder";
  if (has(t, ">>>all") || (has(t, "'>>>'") && has(t, "recipient"))) return "functionary_v3_2";
  if (has(t, "<function=") && has(t, "</function>")) return "functionary_v3_1";
  if (has(t, "<longcat_tool_call>")) return "longcat";
  if (has(t, "<|START_ACTION|>")) return "command_r7b";
  if (has(t, "<start_function_call>")) return "functiongemma";
  if (has(t, "<|tool_call>")) return "gemma4";
  if (has(t, "<|tool_call_start|>")) return "lfm2";
  if (has(t, "<|tool_list_start|>")) return "lfm2";
  if (has(t, "function call") && has(t, "role_sep")) return "gigachat3";
  if (has(t, "<function_calls>")) return "olmo3";
  if (has(t, "<|action_start|>")) return "internlm";
  if (has(t, "<TOOLCALL>")) return "nemotron";
  if (has(t, "<tool_calls>")) {
    if (has(t, "ai name=assistant") || has(t, "<beginning_of_sentence>")) return "minimax";
    if (has(t, "hy_")) return "hunyuan_a13b";
    return "jamba";
  }
  if (has(t, "[TOOL_CALLS]")) return "mistral";
  if (has(t, "functools")) return has(t, "<|tool|>") ? "phi4_mini_json" : "firefunction_v2";
  if (has(t, "<|tool_call|>")) return "granite";
  if (has(t, "<function_call>")) return "granite-20b-fc";
  if (has(t, "<|python_start|>")) return "llama4_pythonic";
  if (has(t, "<tool_call>")) return "hermes";
  if (has(t, "<|python_tag|>") || has(t, "ipython")) return "llama3_json";

  static const std::pair<const char*, const char*> kByType[] = {
      {"qwen3_moe", "hermes"},   {"qwen3", "hermes"},          {"qwen2", "hermes"},
      {"llama4", "llama4_pythonic"}, {"llama", "llama3_json"},  {"mistral", "mistral"}, {"ministral", "mistral"},
      {"mixtral", "mistral"},    {"deepseek_v3", "deepseek_v3"}, {"kimi_k2", "kimi_k2"},
      {"glm4_moe", "glm45"},     {"minimax_m2", "minimax_m2"}, {"gpt_oss", "gpt_oss"},
      {"granite", "granite"},    {"internlm2", "internlm"},    {"jamba", "jamba"},
      {"hunyuan", "hunyuan_a13b"}, {"seed_oss", "seed_oss"},   {"step3", "step3"},
      {"longcat", "longcat"},    {"gemma3", ""},               {"gemma4", "gemma4"},
      {"cohere2", "command_r7b"}, {"ernie4_5", "ernie45"},     {"olmo3", "olmo3"},
      {"lfm2", "lfm2"},          {"phi3", "phi4_mini_json"},
  };
  std::string mt = lower(model_type);
  for (auto& [k, v] : kByType)
    if (mt.rfind(k, 0) == 0) return v;
  return "";
}

std::string detect_reasoning_parser(const std::string& t, const std::string& model_type) {
  if (has(t, "<|channel|>") && has(t, "analysis")) return "gpt_oss";
  if (has(t, "<seed:think>")) return "seed_oss";
  if (has(t, "[THINK]")) return "mistral";
  if (has(t, "<|START_THINKING|>")) return "command_r7b";
  if (has(t, "<|channel>")) return "gemma4";
  if (has(t, "<minimax:tool_call>") && has(t, "<think>")) return "minimax_m2";
  if (has(t, "[BEGIN FINAL RESPONSE]")) return "apriel";
  if (has(t, "Here is my thought process") || (has(t, "<response>") && has(t, "<think>"))) return "granite";
  if (has(t, "<think>") || has(t, "</think>")) {
    // DeepSeek R1 style templates open <think> in the prompt: the reply starts inside it.
    if (has(t, "<｜Assistant｜>") && !has(t, "<think></think>")) return "deepseek_r1";
    if (has(t, "<|im_start|>assistant\\n<think>\\n") || has(t, "<answer>")) return has(t, "<answer>") ? "hunyuan_a13b" : "qwen3";
    return "qwen3";
  }
  std::string mt = lower(model_type);
  if (mt.rfind("deepseek_r1", 0) == 0) return "deepseek_r1";
  if (mt.rfind("qwen3", 0) == 0) return "qwen3";
  if (mt.rfind("gpt_oss", 0) == 0) return "gpt_oss";
  return "";
}

}  // namespace rapid::parsers
