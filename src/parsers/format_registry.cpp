// The table of tool-call and reasoning formats. Markers come from each model's chat template (the
// emitting side) and the public docs of vLLM / SGLang / llama.cpp parsers.
#include <algorithm>

#include "parsers/tool_format.h"

namespace rapid::parsers {

namespace {

ToolFormat json_block(std::string name, std::vector<std::string> aliases, std::vector<std::string> starts,
                      std::string end) {
  ToolFormat f;
  f.name = std::move(name);
  f.aliases = std::move(aliases);
  f.starts = std::move(starts);
  f.end = std::move(end);
  f.body = Body::JsonCalls;
  return f;
}

std::vector<ToolFormat> build_tool_formats() {
  std::vector<ToolFormat> v;
  const std::string kJsonCall = "{\"name\": \"{NAME}\", \"arguments\": {ARGS}}";

  {  // Hermes 2 Pro / Qwen2.5 / Qwen3 / QwQ: <tool_call>\n{json}\n</tool_call>
    auto f = json_block("hermes", {"qwen", "qwen2_5", "qwen3", "qwq", "hermes2_pro", "granite4", "granite_4"},
                        {"<tool_call>"}, "</tool_call>");
    f.g_call = "<tool_call>\n" + kJsonCall + "\n</tool_call>";
    f.g_sep = "\n";
    v.push_back(f);
  }
  {  // Qwen3-Coder / Qwen3.5: XML parameters typed by the tool schema.
    ToolFormat f;
    f.name = "qwen3_coder";
    f.aliases = {"qwen3_xml", "qwen3coder", "qwen3_5", "qwen35_coder"};
    f.starts = {"<tool_call>"};
    f.end = "</tool_call>";
    f.body = Body::XmlFunction;
    f.typing = ArgTyping::AlwaysString;
    f.g_call = "<tool_call>\n<function={NAME}>\n{ARGS}</function>\n</tool_call>";
    f.g_sep = "\n";
    f.g_args = "xml";
    f.g_param = "<parameter={KEY}>\n{VALUE}\n</parameter>\n";
    v.push_back(f);
  }
  {  // Llama 3.1/3.2 JSON tool calls, with or without <|python_tag|>; several joined by ";".
    ToolFormat f;
    f.name = "llama3_json";
    f.aliases = {"llama", "llama3", "llama3_1", "llama3_2", "llama4_json"};
    f.starts = {"<|python_tag|>"};
    f.leading = {"{"};
    f.body = Body::JsonCalls;
    f.strip = {"<|eom_id|>", "<|eot_id|>"};
    f.g_call = "{\"name\": \"{NAME}\", \"parameters\": {ARGS}}";
    f.g_sep = "; ";
    v.push_back(f);
  }
  {  // Llama 4 pythonic: [f(a=1)], optionally inside <|python_start|> ... <|python_end|>.
    ToolFormat f;
    f.name = "llama4_pythonic";
    f.aliases = {"llama4"};
    f.starts = {"<|python_start|>"};
    f.end = "<|python_end|>";
    f.leading = {"["};
    f.body = Body::Pythonic;
    f.g_prefix = "[";
    f.g_call = "{NAME}({ARGS})";
    f.g_sep = ", ";
    f.g_suffix = "]";
    f.g_args = "python-kwargs";
    v.push_back(f);
  }
  {  // Generic pythonic list: [f(a=1), g(b="x")].
    ToolFormat f;
    f.name = "pythonic";
    f.aliases = {"granite_pythonic"};
    f.leading = {"["};
    f.body = Body::Pythonic;
    f.g_prefix = "[";
    f.g_call = "{NAME}({ARGS})";
    f.g_sep = ", ";
    f.g_suffix = "]";
    f.g_args = "python-kwargs";
    v.push_back(f);
  }
  {  // Mistral: [TOOL_CALLS][{...}] before v11, [TOOL_CALLS]name[ARGS]{...} from v11 on.
    ToolFormat f;
    f.name = "mistral";
    f.aliases = {"mistral_v11", "devstral", "magistral", "ministral"};
    f.starts = {"[TOOL_CALLS]"};
    f.body = Body::MistralAny;
    f.ids = IdStyle::Mistral9;
    f.g_call = "[TOOL_CALLS]{NAME}[ARGS]{ARGS}";
    v.push_back(f);
  }
  {  // DeepSeek V3 / R1: function<sep>name\n```json\n{...}\n```
    ToolFormat f;
    f.name = "deepseek_v3";
    f.aliases = {"deepseek_r1", "deepseekv3", "deepseek-v3", "deepseek_r1_0528"};
    f.starts = {"<｜tool▁calls▁begin｜>"};
    f.end = "<｜tool▁calls▁end｜>";
    f.require_end = true;
    f.inner_start = "<｜tool▁call▁begin｜>";
    f.inner_end = "<｜tool▁call▁end｜>";
    f.strip = {"<｜end▁of▁sentence｜>"};
    f.body = Body::DeepseekV3;
    f.sep = "<｜tool▁sep｜>";
    f.g_prefix = "<｜tool▁calls▁begin｜>";
    f.g_call = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>{NAME}\n```json\n{ARGS}\n```<｜tool▁call▁end｜>";
    f.g_sep = "\n";
    f.g_suffix = "<｜tool▁calls▁end｜>";
    v.push_back(f);
  }
  {  // DeepSeek V3.1: name<sep>{json}
    ToolFormat f;
    f.name = "deepseek_v31";
    f.aliases = {"deepseekv31", "deepseek-v3.1"};
    f.starts = {"<｜tool▁calls▁begin｜>"};
    f.end = "<｜tool▁calls▁end｜>";
    f.require_end = true;
    f.inner_start = "<｜tool▁call▁begin｜>";
    f.inner_end = "<｜tool▁call▁end｜>";
    f.strip = {"<｜end▁of▁sentence｜>"};
    f.body = Body::NameSepJson;
    f.sep = "<｜tool▁sep｜>";
    f.g_prefix = "<｜tool▁calls▁begin｜>";
    f.g_call = "<｜tool▁call▁begin｜>{NAME}<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜>";
    f.g_suffix = "<｜tool▁calls▁end｜>";
    v.push_back(f);
  }
  {  // DeepSeek V3.2 DSML.
    ToolFormat f;
    f.name = "deepseek_v32";
    f.aliases = {"deepseekv32", "deepseek-v3.2", "dsml"};
    f.starts = {"<｜DSML｜function_calls>"};
    f.end = "</｜DSML｜function_calls>";
    f.body = Body::XmlInvoke;
    f.invoke_open = "<｜DSML｜invoke";
    f.invoke_close = "</｜DSML｜invoke>";
    f.param_open = "<｜DSML｜parameter";
    f.param_close = "</｜DSML｜parameter>";
    f.g_prefix = "<｜DSML｜function_calls>\n";
    f.g_call = "<｜DSML｜invoke name=\"{NAME}\">\n{ARGS}</｜DSML｜invoke>\n";
    f.g_suffix = "</｜DSML｜function_calls>";
    f.g_args = "xml";
    // Without the string="..." attribute the parser types values by the tool schema instead.
    f.g_param = "<｜DSML｜parameter name=\"{KEY}\">{VALUE}</｜DSML｜parameter>\n";
    v.push_back(f);
  }
  {  // Kimi K2: ids are "functions.NAME:IDX".
    ToolFormat f;
    f.name = "kimi_k2";
    f.aliases = {"kimi", "kimi_k2_thinking"};
    f.starts = {"<|tool_calls_section_begin|>"};
    f.end = "<|tool_calls_section_end|>";
    f.require_end = true;
    f.inner_start = "<|tool_call_begin|>";
    f.inner_end = "<|tool_call_end|>";
    f.body = Body::NameSepJson;
    f.sep = "<|tool_call_argument_begin|>";
    f.ids = IdStyle::Kimi;
    f.g_prefix = "<|tool_calls_section_begin|>";
    f.g_call = "<|tool_call_begin|>functions.{NAME}:[0-9]+<|tool_call_argument_begin|>{ARGS}<|tool_call_end|>";
    f.g_suffix = "<|tool_calls_section_end|>";
    v.push_back(f);
  }
  {  // GLM 4.5 / 4.6 / 4.7: <tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
    ToolFormat f;
    f.name = "glm45";
    f.aliases = {"glm4_moe", "glm4.5", "glm46", "glm47", "glm4_7", "glm"};
    f.starts = {"<tool_call>"};
    f.end = "</tool_call>";
    f.body = Body::GlmArgs;
    f.require_end = true;
    f.g_call = "<tool_call>{NAME}\n{ARGS}</tool_call>";
    f.g_sep = "\n";
    f.g_args = "xml";
    f.g_param = "<arg_key>{KEY}</arg_key>\n<arg_value>{VALUE}</arg_value>\n";
    v.push_back(f);
  }
  {  // MiniMax M2.
    ToolFormat f;
    f.name = "minimax_m2";
    f.aliases = {"minimax-m2", "minimax_m2_1"};
    f.starts = {"<minimax:tool_call>"};
    f.end = "</minimax:tool_call>";
    f.body = Body::XmlInvoke;
    f.typing = ArgTyping::AlwaysString;  // vLLM keeps untyped values as text
    f.invoke_open = "<invoke";
    f.invoke_close = "</invoke>";
    f.param_open = "<parameter";
    f.param_close = "</parameter>";
    f.g_prefix = "<minimax:tool_call>\n";
    f.g_call = "<invoke name=\"{NAME}\">\n{ARGS}</invoke>\n";
    f.g_suffix = "</minimax:tool_call>";
    f.g_args = "xml";
    f.g_param = "<parameter name=\"{KEY}\">{VALUE}</parameter>\n";
    v.push_back(f);
  }
  {  // MiniMax M1: one JSON object per line inside <tool_calls>.
    auto f = json_block("minimax", {"minimax_m1"}, {"<tool_calls>"}, "</tool_calls>");
    f.g_prefix = "<tool_calls>\n";
    f.g_call = kJsonCall + "\n";
    f.g_suffix = "</tool_calls>";
    v.push_back(f);
  }
  {  // Granite 3.x: <|tool_call|>[{...}]
    auto f = json_block("granite", {"granite3"}, {"<|tool_call|>"}, "");
    f.g_prefix = "<|tool_call|>[";
    f.g_call = kJsonCall;
    f.g_sep = ", ";
    f.g_suffix = "]";
    v.push_back(f);
  }
  {  // Granite 20B function calling: <function_call> {...} repeated.
    auto f = json_block("granite-20b-fc", {"granite_20b_fc"}, {"<function_call>"}, "");
    f.g_call = "<function_call> " + kJsonCall;
    f.g_sep = " ";
    v.push_back(f);
  }
  {  // Functionary v3.1 (Llama 3.1 base): <function=name>{json}</function>
    ToolFormat f;
    f.name = "functionary_v3_1";
    f.aliases = {"functionary-v3.1", "functionary_v31", "llama3_function"};
    f.starts = {"<function="};
    f.end = "</function>";
    f.body = Body::NameSepJson;
    f.sep = ">";
    f.strip = {"<|eom_id|>", "<|eot_id|>"};
    f.g_call = "<function={NAME}>{ARGS}</function>";
    v.push_back(f);
  }
  {  // Functionary v3.2: the prompt ends with ">>>"; ">>>all\n" is text, ">>>name\n{json}" a call.
    ToolFormat f;
    f.name = "functionary_v3_2";
    f.aliases = {"functionary-v3.2", "functionary_v32", "functionary"};
    f.starts = {">>>"};
    f.end = ">>>";
    f.end_is_lookahead = true;
    f.strip = {">>>all\n", "<|eot_id|>"};
    f.implicit_prefix = ">>>";
    f.body = Body::NameSepJson;
    f.sep = "\n";
    f.g_call = "{NAME}\n{ARGS}";
    f.g_sep = ">>>";
    v.push_back(f);
  }
  {  // FireFunction v2: " functools[{...}]"
    auto f = json_block("firefunction_v2", {"firefunction", "firefunction-v2"}, {" functools", "functools"}, "");
    f.g_prefix = " functools[";
    f.g_call = kJsonCall;
    f.g_sep = ", ";
    f.g_suffix = "]";
    v.push_back(f);
  }
  {  // xLAM: a bare JSON array (maybe fenced, maybe after [TOOL_CALLS] or <tool_call>).
    auto f = json_block("xlam", {"xlam_llama", "xlam_qwen"}, {"[TOOL_CALLS]", "```json", "<tool_call>"}, "");
    f.strip = {"</tool_call>"};
    f.leading = {"[", "```"};
    f.g_prefix = "[";
    f.g_call = kJsonCall;
    f.g_sep = ", ";
    f.g_suffix = "]";
    v.push_back(f);
  }
  {  // Phi-4-mini: functools[{...}]
    auto f = json_block("phi4_mini_json", {"phi4_mini", "phi4mini"}, {"functools"}, "");
    f.g_prefix = "functools[";
    f.g_call = kJsonCall;
    f.g_sep = ", ";
    f.g_suffix = "]";
    v.push_back(f);
  }
  {  // InternLM 2/2.5: <|action_start|><|plugin|>\n{"name", "parameters"}<|action_end|>
    auto f = json_block("internlm", {"internlm2", "internlm2_5"}, {"<|action_start|><|plugin|>"}, "<|action_end|>");
    f.g_call = "<|action_start|><|plugin|>\n{\"name\": \"{NAME}\", \"parameters\": {ARGS}}<|action_end|>";
    v.push_back(f);
  }
  {  // Jamba: <tool_calls>[{...}]</tool_calls>
    auto f = json_block("jamba", {"jamba1_5"}, {"<tool_calls>"}, "</tool_calls>");
    f.g_prefix = "<tool_calls>[";
    f.g_call = kJsonCall;
    f.g_sep = ", ";
    f.g_suffix = "]</tool_calls>";
    v.push_back(f);
  }
  {  // Hunyuan A13B: <tool_calls>[{...}]</tool_calls>, answers wrapped in <answer>.
    auto f = json_block("hunyuan_a13b", {"hunyuan"}, {"<tool_calls>"}, "</tool_calls>");
    f.strip = {"<answer>", "</answer>"};
    f.g_prefix = "<tool_calls>[";
    f.g_call = kJsonCall;
    f.g_sep = ", ";
    f.g_suffix = "]</tool_calls>";
    v.push_back(f);
  }
  {  // Seed-OSS: Qwen3-Coder style XML inside <seed:tool_call>.
    ToolFormat f;
    f.name = "seed_oss";
    f.aliases = {"seed-oss", "seed"};
    f.starts = {"<seed:tool_call>"};
    f.end = "</seed:tool_call>";
    f.body = Body::XmlFunction;
    f.typing = ArgTyping::AlwaysString;
    f.g_call = "<seed:tool_call>\n<function={NAME}>\n{ARGS}</function>\n</seed:tool_call>";
    f.g_args = "xml";
    f.g_param = "<parameter={KEY}>{VALUE}</parameter>\n";
    v.push_back(f);
  }
  {  // Step3: steptml invokes inside DeepSeek-like call markers.
    ToolFormat f;
    f.name = "step3";
    f.aliases = {"step-3"};
    f.starts = {"<｜tool_calls_begin｜>"};
    f.end = "<｜tool_calls_end｜>";
    f.require_end = true;
    f.inner_start = "<｜tool_call_begin｜>";
    f.inner_end = "<｜tool_call_end｜>";
    f.body = Body::XmlInvoke;
    f.invoke_open = "<steptml:invoke";
    f.invoke_close = "</steptml:invoke>";
    f.param_open = "<steptml:parameter";
    f.param_close = "</steptml:parameter>";
    f.g_prefix = "<｜tool_calls_begin｜>";
    f.g_call = "<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"{NAME}\">{ARGS}</steptml:invoke><｜tool_call_end｜>";
    f.g_suffix = "<｜tool_calls_end｜>";
    f.g_args = "xml";
    f.g_param = "<steptml:parameter name=\"{KEY}\">{VALUE}</steptml:parameter>";
    v.push_back(f);
  }
  {  // LongCat Flash.
    auto f = json_block("longcat", {"longcat_flash"}, {"<longcat_tool_call>"}, "</longcat_tool_call>");
    f.g_call = "<longcat_tool_call>" + kJsonCall + "</longcat_tool_call>";
    v.push_back(f);
  }
  {  // FunctionGemma: <start_function_call>call:name{k:<escape>v<escape>}<end_function_call>
    ToolFormat f;
    f.name = "functiongemma";
    f.aliases = {"function_gemma"};
    f.starts = {"<start_function_call>"};
    f.end = "<end_function_call>";
    f.body = Body::GemmaCall;
    f.q = "<escape>";
    f.g_call = "<start_function_call>call:{NAME}{ARGS}<end_function_call>";
    f.g_args = "gemma:<escape>";
    v.push_back(f);
  }
  {  // Gemma 4: <|tool_call>call:name{k:<|"|>v<|"|>}<tool_call|>
    ToolFormat f;
    f.name = "gemma4";
    f.aliases = {"gemma-4"};
    f.starts = {"<|tool_call>"};
    f.end = "<tool_call|>";
    f.body = Body::GemmaCall;
    f.q = "<|\"|>";
    f.g_call = "<|tool_call>call:{NAME}{ARGS}<tool_call|>";
    f.g_args = "gemma:<|\"|>";
    v.push_back(f);
  }
  {  // Command R7B: <|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>
    auto f = json_block("command_r7b", {"cohere", "command-r7b", "command_r"}, {"<|START_ACTION|>"}, "<|END_ACTION|>");
    f.strip = {"<|START_RESPONSE|>", "<|END_RESPONSE|>"};
    f.g_prefix = "<|START_ACTION|>[\n";
    f.g_call = "{\"tool_call_id\": \"[0-9]+\", \"tool_name\": \"{NAME}\", \"parameters\": {ARGS}}";
    f.g_sep = ",\n";
    f.g_suffix = "\n]<|END_ACTION|>";
    v.push_back(f);
  }
  {  // ERNIE 4.5: <tool_call>{json}</tool_call>
    auto f = json_block("ernie45", {"ernie", "ernie4_5"}, {"<tool_call>"}, "</tool_call>");
    f.g_call = "<tool_call>" + kJsonCall + "</tool_call>";
    v.push_back(f);
  }
  {  // OLMo 3: <function_calls>f(a=1)\ng(b=2)</function_calls>
    ToolFormat f;
    f.name = "olmo3";
    f.aliases = {"olmo"};
    f.starts = {"<function_calls>"};
    f.end = "</function_calls>";
    f.body = Body::PythonicLines;
    f.g_prefix = "<function_calls>";
    f.g_call = "{NAME}({ARGS})";
    f.g_sep = "\n";
    f.g_suffix = "</function_calls>";
    f.g_args = "python-kwargs";
    v.push_back(f);
  }
  {  // LFM2: <|tool_call_start|>[f(a=1)]<|tool_call_end|>
    ToolFormat f;
    f.name = "lfm2";
    f.aliases = {"lfm2.5", "liquid"};
    f.starts = {"<|tool_call_start|>"};
    f.end = "<|tool_call_end|>";
    f.body = Body::Pythonic;
    f.g_prefix = "<|tool_call_start|>[";
    f.g_call = "{NAME}({ARGS})";
    f.g_sep = ", ";
    f.g_suffix = "]<|tool_call_end|>";
    f.g_args = "python-kwargs";
    v.push_back(f);
  }
  {  // GigaChat 3: <|message_sep|>\n\nfunction call<|role_sep|>\n{json}
    auto f = json_block("gigachat3", {"gigachat"}, {"function call<|role_sep|>"}, "");
    f.strip = {"<|message_sep|>\n\n", "<|message_sep|>"};
    f.g_call = "<|message_sep|>\n\nfunction call<|role_sep|>\n" + kJsonCall;
    v.push_back(f);
  }
  {  // NVIDIA Nemotron Nano v2: <TOOLCALL>[{...}]</TOOLCALL>
    auto f = json_block("nemotron", {"nemotron_json", "nemotron_nano_v2"}, {"<TOOLCALL>"}, "</TOOLCALL>");
    f.g_prefix = "<TOOLCALL>[";
    f.g_call = kJsonCall;
    f.g_sep = ", ";
    f.g_suffix = "]</TOOLCALL>";
    v.push_back(f);
  }
  {  // Generic fallback: a bare {"name", "arguments"} object (or array of them) as the whole reply.
    auto f = json_block("json", {"generic", "generic_json"}, {}, "");
    f.leading = {"{", "[", "```"};
    f.g_call = kJsonCall;
    v.push_back(f);
  }
  return v;
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
  static const std::vector<ToolFormat> v = build_tool_formats();
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
