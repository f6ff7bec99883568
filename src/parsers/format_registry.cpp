// The table of tool-call and reasoning formats. Markers come from each model's chat template (the
// emitting side) and the public docs of vLLM / SGLang / llama.cpp parsers.
#include <algorithm>

#include "parsers/tool_format.h"

namespace rapid::parsers {

namespace {

// ---- Grammar shapes several formats share ----
constexpr const char* kJsonCall = "{\"name\": \"{NAME}\", \"arguments\": {ARGS}}";

// One JSON call in its own wrapper, OPEN{json}CLOSE, calls separated by `sep`.
CallGrammar json_each(const std::string& open, const std::string& close, const std::string& sep = "") {
  return {.call = open + kJsonCall + close, .sep = sep};
}

// A JSON list of calls: PREFIX[{json}, {json}]SUFFIX.
CallGrammar json_list(const std::string& prefix, const std::string& suffix = "") {
  return {.prefix = prefix + "[", .call = kJsonCall, .sep = ", ", .suffix = "]" + suffix};
}

// Python calls f(a=1), separated by `sep`, between prefix and suffix.
CallGrammar python_calls(const std::string& prefix, const std::string& sep, const std::string& suffix) {
  return {.prefix = prefix, .call = "{NAME}({ARGS})", .sep = sep, .suffix = suffix, .args = "python-kwargs"};
}

// Calls whose arguments are XML parameters written as `param`.
CallGrammar xml_calls(const std::string& prefix, const std::string& call, const std::string& sep,
                      const std::string& suffix, const std::string& param) {
  return {.prefix = prefix, .call = call, .sep = sep, .suffix = suffix, .args = "xml", .param = param};
}

// DeepSeek V3 / V3.1 share their section markers.
constexpr const char* kDsCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr const char* kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr const char* kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr const char* kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr const char* kDsSep = "<｜tool▁sep｜>";
constexpr const char* kDsEos = "<｜end▁of▁sentence｜>";

// The table: one entry per format (fields in ToolFormat's order; body defaults to JsonCalls).
// Its length is data, not logic. Several formats share "<tool_call>" or "<tool_calls>": the parser is chosen by
// name (detect.cpp), never by marker.
std::vector<ToolFormat> tool_table() {
  return {
      // Hermes 2 Pro / Qwen2.5 / Qwen3 / QwQ: <tool_call>\n{json}\n</tool_call>
      {.name = "hermes", .aliases = {"qwen", "qwen2_5", "qwen3", "qwq", "hermes2_pro", "granite4", "granite_4"},
       .starts = {"<tool_call>"}, .end = "</tool_call>",
       .grammar = json_each("<tool_call>\n", "\n</tool_call>", "\n")},
      // Qwen3-Coder / Qwen3.5: XML parameters typed by the tool schema.
      {.name = "qwen3_coder", .aliases = {"qwen3_xml", "qwen3coder", "qwen3_5", "qwen35_coder"},
       .body = Body::XmlFunction, .starts = {"<tool_call>"}, .end = "</tool_call>", .typing = ArgTyping::AlwaysString,
       .grammar = xml_calls("", "<tool_call>\n<function={NAME}>\n{ARGS}</function>\n</tool_call>", "\n", "",
                            "<parameter={KEY}>\n{VALUE}\n</parameter>\n")},
      // Llama 3.1/3.2 JSON tool calls, with or without <|python_tag|>; several joined by ";".
      {.name = "llama3_json", .aliases = {"llama", "llama3", "llama3_1", "llama3_2", "llama4_json"},
       .starts = {"<|python_tag|>"}, .leading = {"{"}, .strip = {"<|eom_id|>", "<|eot_id|>"},
       .grammar = {.call = "{\"name\": \"{NAME}\", \"parameters\": {ARGS}}", .sep = "; "}},
      // Llama 4 pythonic: [f(a=1)], optionally inside <|python_start|> ... <|python_end|>.
      {.name = "llama4_pythonic", .aliases = {"llama4"}, .body = Body::Pythonic, .starts = {"<|python_start|>"},
       .end = "<|python_end|>", .leading = {"["}, .grammar = python_calls("[", ", ", "]")},
      // Generic pythonic list: [f(a=1), g(b="x")].
      {.name = "pythonic", .aliases = {"granite_pythonic"}, .body = Body::Pythonic, .leading = {"["},
       .grammar = python_calls("[", ", ", "]")},
      // Mistral: [TOOL_CALLS][{...}] before v11, [TOOL_CALLS]name[ARGS]{...} from v11 on.
      {.name = "mistral", .aliases = {"mistral_v11", "devstral", "magistral", "ministral"}, .body = Body::MistralAny,
       .starts = {"[TOOL_CALLS]"}, .ids = IdStyle::Mistral9, .grammar = {.call = "[TOOL_CALLS]{NAME}[ARGS]{ARGS}"}},
      // DeepSeek V3 / R1: function<sep>name\n```json\n{...}\n```
      {.name = "deepseek_v3", .aliases = {"deepseek_r1", "deepseekv3", "deepseek-v3", "deepseek_r1_0528"},
       .body = Body::DeepseekV3, .starts = {kDsCallsBegin}, .end = kDsCallsEnd, .require_end = true,
       .inner_start = kDsCallBegin, .inner_end = kDsCallEnd, .strip = {kDsEos}, .sep = kDsSep,
       .grammar = {.prefix = kDsCallsBegin,
                   .call = std::string(kDsCallBegin) + "function" + kDsSep + "{NAME}\n```json\n{ARGS}\n```" + kDsCallEnd,
                   .sep = "\n", .suffix = kDsCallsEnd}},
      // DeepSeek V3.1: name<sep>{json}
      {.name = "deepseek_v31", .aliases = {"deepseekv31", "deepseek-v3.1"}, .body = Body::NameSepJson,
       .starts = {kDsCallsBegin}, .end = kDsCallsEnd, .require_end = true, .inner_start = kDsCallBegin,
       .inner_end = kDsCallEnd, .strip = {kDsEos}, .sep = kDsSep,
       .grammar = {.prefix = kDsCallsBegin, .call = std::string(kDsCallBegin) + "{NAME}" + kDsSep + "{ARGS}" + kDsCallEnd,
                   .suffix = kDsCallsEnd}},
      // DeepSeek V3.2 DSML. Without the string="..." attribute the parser types values by the
      // tool schema instead.
      {.name = "deepseek_v32", .aliases = {"deepseekv32", "deepseek-v3.2", "dsml"}, .body = Body::XmlInvoke,
       .starts = {"<｜DSML｜function_calls>"}, .end = "</｜DSML｜function_calls>",
       .invoke_open = "<｜DSML｜invoke", .invoke_close = "</｜DSML｜invoke>",
       .param_open = "<｜DSML｜parameter", .param_close = "</｜DSML｜parameter>",
       .grammar = xml_calls("<｜DSML｜function_calls>\n", "<｜DSML｜invoke name=\"{NAME}\">\n{ARGS}</｜DSML｜invoke>\n", "",
                            "</｜DSML｜function_calls>", "<｜DSML｜parameter name=\"{KEY}\">{VALUE}</｜DSML｜parameter>\n")},
      // Kimi K2: ids are "functions.NAME:IDX".
      {.name = "kimi_k2", .aliases = {"kimi", "kimi_k2_thinking"}, .body = Body::NameSepJson,
       .starts = {"<|tool_calls_section_begin|>"}, .end = "<|tool_calls_section_end|>", .require_end = true,
       .inner_start = "<|tool_call_begin|>", .inner_end = "<|tool_call_end|>", .ids = IdStyle::Kimi,
       .sep = "<|tool_call_argument_begin|>",
       .grammar = {.prefix = "<|tool_calls_section_begin|>",
                   .call = "<|tool_call_begin|>functions.{NAME}:[0-9]+<|tool_call_argument_begin|>{ARGS}<|tool_call_end|>",
                   .suffix = "<|tool_calls_section_end|>"}},
      // GLM 4.5 / 4.6 / 4.7: <tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
      {.name = "glm45", .aliases = {"glm4_moe", "glm4.5", "glm46", "glm47", "glm4_7", "glm"}, .body = Body::GlmArgs,
       .starts = {"<tool_call>"}, .end = "</tool_call>", .require_end = true,
       .grammar = xml_calls("", "<tool_call>{NAME}\n{ARGS}</tool_call>", "\n", "",
                            "<arg_key>{KEY}</arg_key>\n<arg_value>{VALUE}</arg_value>\n")},
      // MiniMax M2 (vLLM keeps untyped values as text).
      {.name = "minimax_m2", .aliases = {"minimax-m2", "minimax_m2_1"}, .body = Body::XmlInvoke,
       .starts = {"<minimax:tool_call>"}, .end = "</minimax:tool_call>", .typing = ArgTyping::AlwaysString,
       .invoke_open = "<invoke", .invoke_close = "</invoke>", .param_open = "<parameter", .param_close = "</parameter>",
       .grammar = xml_calls("<minimax:tool_call>\n", "<invoke name=\"{NAME}\">\n{ARGS}</invoke>\n", "",
                            "</minimax:tool_call>", "<parameter name=\"{KEY}\">{VALUE}</parameter>\n")},
      // MiniMax M1: one JSON object per line inside <tool_calls>.
      {.name = "minimax", .aliases = {"minimax_m1"}, .starts = {"<tool_calls>"}, .end = "</tool_calls>",
       .grammar = {.prefix = "<tool_calls>\n", .call = std::string(kJsonCall) + "\n", .suffix = "</tool_calls>"}},
      // Granite 3.x: <|tool_call|>[{...}]
      {.name = "granite", .aliases = {"granite3"}, .starts = {"<|tool_call|>"}, .grammar = json_list("<|tool_call|>")},
      // Granite 20B function calling: <function_call> {...} repeated.
      {.name = "granite-20b-fc", .aliases = {"granite_20b_fc"}, .starts = {"<function_call>"},
       .grammar = json_each("<function_call> ", "", " ")},
      // Functionary v3.1 (Llama 3.1 base): <function=name>{json}</function>
      {.name = "functionary_v3_1", .aliases = {"functionary-v3.1", "functionary_v31", "llama3_function"},
       .body = Body::NameSepJson, .starts = {"<function="}, .end = "</function>", .strip = {"<|eom_id|>", "<|eot_id|>"},
       .sep = ">", .grammar = {.call = "<function={NAME}>{ARGS}</function>"}},
      // Functionary v3.2: the prompt ends with ">>>"; ">>>all\n" is text, ">>>name\n{json}" a call.
      {.name = "functionary_v3_2", .aliases = {"functionary-v3.2", "functionary_v32", "functionary"},
       .body = Body::NameSepJson, .starts = {">>>"}, .end = ">>>", .end_is_lookahead = true,
       .strip = {">>>all\n", "<|eot_id|>"}, .implicit_prefix = ">>>", .sep = "\n",
       .grammar = {.call = "{NAME}\n{ARGS}", .sep = ">>>"}},
      // FireFunction v2: " functools[{...}]"
      {.name = "firefunction_v2", .aliases = {"firefunction", "firefunction-v2"}, .starts = {" functools", "functools"},
       .grammar = json_list(" functools")},
      // xLAM: a bare JSON array (maybe fenced, maybe after [TOOL_CALLS] or <tool_call>).
      {.name = "xlam", .aliases = {"xlam_llama", "xlam_qwen"}, .starts = {"[TOOL_CALLS]", "```json", "<tool_call>"},
       .leading = {"[", "```"}, .strip = {"</tool_call>"}, .grammar = json_list("")},
      // Phi-4-mini: functools[{...}]
      {.name = "phi4_mini_json", .aliases = {"phi4_mini", "phi4mini"}, .starts = {"functools"},
       .grammar = json_list("functools")},
      // InternLM 2/2.5: <|action_start|><|plugin|>\n{"name", "parameters"}<|action_end|>
      {.name = "internlm", .aliases = {"internlm2", "internlm2_5"}, .starts = {"<|action_start|><|plugin|>"},
       .end = "<|action_end|>",
       .grammar = {.call = "<|action_start|><|plugin|>\n{\"name\": \"{NAME}\", \"parameters\": {ARGS}}<|action_end|>"}},
      // Jamba: <tool_calls>[{...}]</tool_calls>
      {.name = "jamba", .aliases = {"jamba1_5"}, .starts = {"<tool_calls>"}, .end = "</tool_calls>",
       .grammar = json_list("<tool_calls>", "</tool_calls>")},
      // Hunyuan A13B: <tool_calls>[{...}]</tool_calls>, answers wrapped in <answer>.
      {.name = "hunyuan_a13b", .aliases = {"hunyuan"}, .starts = {"<tool_calls>"}, .end = "</tool_calls>",
       .strip = {"<answer>", "</answer>"}, .grammar = json_list("<tool_calls>", "</tool_calls>")},
      // Seed-OSS: Qwen3-Coder style XML inside <seed:tool_call>.
      {.name = "seed_oss", .aliases = {"seed-oss", "seed"}, .body = Body::XmlFunction, .starts = {"<seed:tool_call>"},
       .end = "</seed:tool_call>", .typing = ArgTyping::AlwaysString,
       .grammar = xml_calls("", "<seed:tool_call>\n<function={NAME}>\n{ARGS}</function>\n</seed:tool_call>", "", "",
                            "<parameter={KEY}>{VALUE}</parameter>\n")},
      // Step3: steptml invokes inside DeepSeek-like call markers.
      {.name = "step3", .aliases = {"step-3"}, .body = Body::XmlInvoke, .starts = {"<｜tool_calls_begin｜>"},
       .end = "<｜tool_calls_end｜>", .require_end = true, .inner_start = "<｜tool_call_begin｜>",
       .inner_end = "<｜tool_call_end｜>", .invoke_open = "<steptml:invoke", .invoke_close = "</steptml:invoke>",
       .param_open = "<steptml:parameter", .param_close = "</steptml:parameter>",
       .grammar = xml_calls("<｜tool_calls_begin｜>",
                            "<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"{NAME}\">{ARGS}"
                            "</steptml:invoke><｜tool_call_end｜>",
                            "", "<｜tool_calls_end｜>", "<steptml:parameter name=\"{KEY}\">{VALUE}</steptml:parameter>")},
      // LongCat Flash.
      {.name = "longcat", .aliases = {"longcat_flash"}, .starts = {"<longcat_tool_call>"}, .end = "</longcat_tool_call>",
       .grammar = json_each("<longcat_tool_call>", "</longcat_tool_call>")},
      // FunctionGemma: <start_function_call>call:name{k:<escape>v<escape>}<end_function_call>
      {.name = "functiongemma", .aliases = {"function_gemma"}, .body = Body::GemmaCall,
       .starts = {"<start_function_call>"}, .end = "<end_function_call>", .q = "<escape>",
       .grammar = {.call = "<start_function_call>call:{NAME}{ARGS}<end_function_call>", .args = "gemma:<escape>"}},
      // Gemma 4: <|tool_call>call:name{k:<|"|>v<|"|>}<tool_call|>
      {.name = "gemma4", .aliases = {"gemma-4"}, .body = Body::GemmaCall, .starts = {"<|tool_call>"},
       .end = "<tool_call|>", .q = "<|\"|>",
       .grammar = {.call = "<|tool_call>call:{NAME}{ARGS}<tool_call|>", .args = "gemma:<|\"|>"}},
      // Command R7B: <|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>
      {.name = "command_r7b", .aliases = {"cohere", "command-r7b", "command_r"}, .starts = {"<|START_ACTION|>"},
       .end = "<|END_ACTION|>", .strip = {"<|START_RESPONSE|>", "<|END_RESPONSE|>"},
       .grammar = {.prefix = "<|START_ACTION|>[\n",
                   .call = "{\"tool_call_id\": \"[0-9]+\", \"tool_name\": \"{NAME}\", \"parameters\": {ARGS}}",
                   .sep = ",\n", .suffix = "\n]<|END_ACTION|>"}},
      // ERNIE 4.5: <tool_call>{json}</tool_call>
      {.name = "ernie45", .aliases = {"ernie", "ernie4_5"}, .starts = {"<tool_call>"}, .end = "</tool_call>",
       .grammar = json_each("<tool_call>", "</tool_call>")},
      // OLMo 3: <function_calls>f(a=1)\ng(b=2)</function_calls>
      {.name = "olmo3", .aliases = {"olmo"}, .body = Body::PythonicLines, .starts = {"<function_calls>"},
       .end = "</function_calls>", .grammar = python_calls("<function_calls>", "\n", "</function_calls>")},
      // LFM2: <|tool_call_start|>[f(a=1)]<|tool_call_end|>
      {.name = "lfm2", .aliases = {"lfm2.5", "liquid"}, .body = Body::Pythonic, .starts = {"<|tool_call_start|>"},
       .end = "<|tool_call_end|>", .grammar = python_calls("<|tool_call_start|>[", ", ", "]<|tool_call_end|>")},
      // GigaChat 3: <|message_sep|>\n\nfunction call<|role_sep|>\n{json}
      {.name = "gigachat3", .aliases = {"gigachat"}, .starts = {"function call<|role_sep|>"},
       .strip = {"<|message_sep|>\n\n", "<|message_sep|>"},
       .grammar = json_each("<|message_sep|>\n\nfunction call<|role_sep|>\n", "")},
      // NVIDIA Nemotron Nano v2: <TOOLCALL>[{...}]</TOOLCALL>
      {.name = "nemotron", .aliases = {"nemotron_json", "nemotron_nano_v2"}, .starts = {"<TOOLCALL>"},
       .end = "</TOOLCALL>", .grammar = json_list("<TOOLCALL>", "</TOOLCALL>")},
      // Generic fallback: a bare {"name", "arguments"} object (or array of them) as the whole reply.
      {.name = "json", .aliases = {"generic", "generic_json"}, .leading = {"{", "[", "```"},
       .grammar = json_each("", "")},
  };
}

std::vector<ReasoningFormat> build_reasoning_formats() {
  std::vector<ReasoningFormat> v;
  v.push_back({"qwen3", {"think", "qwq", "glm45", "glm4_moe", "kimi_k2", "kimi", "ernie45", "olmo3",
                         "nemotron", "smollm3", "lfm2"},
               {"<think>"}, {"</think>"}, {}, false});
  v.push_back({"deepseek_r1", {"deepseek_v3", "deepseek_v31", "deepseek"}, {"<think>"}, {"</think>"}, {}, true});
  v.push_back({"minimax_m2", {"minimax", "minimax_m2_append_think"}, {"<think>"}, {"</think>"}, {}, true});
  v.push_back({"hunyuan_a13b", {"hunyuan"}, {"<think>"}, {"</think>"}, {"<answer>", "</answer>"}, false});
  v.push_back({"seed_oss", {"seed"}, {"<seed:think>"}, {"</seed:think>"}, {}, false});
  v.push_back({"mistral", {"magistral"}, {"[THINK]"}, {"[/THINK]"}, {}, false});
  // Granite 3.2 writes "Here is my thought process: ... Here is my response:", 3.3 uses
  // <think>...</think><response>...</response>.
  v.push_back({"granite", {"granite3"},
               {"Here is my thought process:", "Here's my thought process:", "<think>"},
               {"Here is my response:", "Here's my response:", "</think>"}, {"<response>", "</response>"}, false});
  v.push_back({"gemma4", {"gemma"}, {"<|channel>thought\n", "<|channel>thought", "<|channel>"}, {"<channel|>"}, {}, false});
  v.push_back({"command_r7b", {"cohere"}, {"<|START_THINKING|>"}, {"<|END_THINKING|>"},
               {"<|START_RESPONSE|>", "<|END_RESPONSE|>"}, false});
  v.push_back({"step3", {}, {"<think>"}, {"</think>"}, {}, true});
  // Apriel: the prompt opens "Here are my reasoning steps:", the answer follows a marker.
  v.push_back({"apriel", {"apriel_thinker"}, {"Here are my reasoning steps:\n", "Here are my reasoning steps:"},
               {"[BEGIN FINAL RESPONSE]\n", "[BEGIN FINAL RESPONSE]"}, {"[END FINAL RESPONSE]", "<|end|>"}, true});
  return v;
}

bool matches(const std::string& name, const std::string& primary, const std::vector<std::string>& aliases) {
  if (name == primary) return true;
  return std::find(aliases.begin(), aliases.end(), name) != aliases.end();
}

std::string normalise(std::string n) {
  for (auto& c : n) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return n;
}

}  // namespace

const std::vector<ToolFormat>& tool_formats() {
  static const std::vector<ToolFormat> v = tool_table();
  return v;
}

const std::vector<ReasoningFormat>& reasoning_formats() {
  static const std::vector<ReasoningFormat> v = build_reasoning_formats();
  return v;
}

const ToolFormat* find_tool_format(const std::string& name) {
  std::string n = normalise(name);
  for (auto& f : tool_formats())
    if (matches(n, f.name, f.aliases)) return &f;
  // Accept '-' for '_' and vice versa.
  for (auto& c : n) c = c == '-' ? '_' : c;
  for (auto& f : tool_formats()) {
    std::string p = f.name;
    for (auto& c : p) c = c == '-' ? '_' : c;
    if (p == n) return &f;
  }
  return nullptr;
}

const ReasoningFormat* find_reasoning_format(const std::string& name) {
  std::string n = normalise(name);
  for (auto& f : reasoning_formats())
    if (matches(n, f.name, f.aliases)) return &f;
  return nullptr;
}

bool is_harmony(const std::string& name) {
  std::string n = normalise(name);
  return n == "gpt_oss" || n == "gpt-oss" || n == "harmony" || n == "openai" || n == "openai_gptoss";
}

}  // namespace rapid::parsers
