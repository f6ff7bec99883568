// `rapid-mlx template`: renders a chat template over a conversation, to check what prompt a model
// will see. The template comes from a model directory (chat_template.jinja or the chat_template of
// tokenizer_config.json, as transformers picks it) or from a file.
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/command.h"
#include "template/chat_template.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw rapid::FileError(path, "cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// transformers passes the tokenizer's special tokens (strings or AddedToken dicts) to templates.
void add_special_tokens(const ordered_json& cfg, ordered_json& ctx) {
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (ctx.contains(key) || !cfg.contains(key)) continue;
    const auto& v = cfg[key];
    if (v.is_string()) ctx[key] = v;
    else if (v.is_object() && v.contains("content") && v["content"].is_string()) ctx[key] = v["content"];
  }
}

struct Args {
  std::string model_dir, template_file, context_file, name;
  std::optional<std::tm> now;
};

// "YYYY-MM-DD HH:MM:SS" as a calendar time (UTC), weekday and day of year filled in.
std::string parse_now(const std::string& text, std::optional<std::tm>& out) {
  std::tm tm{};
  std::istringstream in(text);
  in >> std::get_time(&tm, "%Y-%m-%d %H:%M:%S");
  if (in.fail() || in.peek() != std::char_traits<char>::eof())
    return "expected 'YYYY-MM-DD HH:MM:SS', got " + rapid::cli::quoted(text);
  std::tm probe = tm;
  timegm(&probe);  // fills weekday and day of year
  tm.tm_wday = probe.tm_wday;
  tm.tm_yday = probe.tm_yday;
  out = tm;
  return "";
}

rapid::cli::FlagTable table(Args& a) {
  using namespace rapid::cli;
  return FlagTable(
      "template",
      {text("--model-dir", "DIR", "take the template from this model directory", &a.model_dir),
       text("--template", "FILE", "take the template from this file", &a.template_file),
       text("--context", "FILE.json",
            "JSON object with messages, optional tools, add_generation_prompt, bos_token, eos_token and extra "
            "variables (enable_thinking, ...); '-' reads stdin",
            &a.context_file)
           .required(),
       text("--name", "TEMPLATE_NAME", "pick a named template when tokenizer_config.json holds several", &a.name),
       custom("--now", "'YYYY-MM-DD HH:MM:SS'", "the time strftime_now sees",
              [&a](const std::string& v) { return parse_now(v, a.now); })
           .default_is("now")},
      "render a chat template over a conversation (JSON)",
      {"(--model-dir DIR | --template FILE) --context FILE.json [options]"});
}

int run(Args& a) {
  if (a.model_dir.empty() == a.template_file.empty())
    throw rapid::cli::UsageError("give one of --model-dir and --template");
  const std::string &model_dir = a.model_dir, &template_file = a.template_file, &context_file = a.context_file,
                    &name = a.name;
  std::string ctx_text;
  if (context_file == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    ctx_text = ss.str();
  } else {
    ctx_text = read_file(context_file);
  }
  ordered_json ctx;
  try {
    ctx = ordered_json::parse(ctx_text);
  } catch (const std::exception& e) {
    throw rapid::FileError(context_file, std::string("invalid JSON: ") + e.what());
  }
  if (!ctx.is_object()) throw rapid::FileError(context_file, "must hold a JSON object");

  std::string source;
  if (!template_file.empty()) {
    source = read_file(template_file);
  } else {
    fs::path dir(model_dir);
    ordered_json cfg = ordered_json::object();
    if (fs::exists(dir / "tokenizer_config.json")) {
      std::string p = (dir / "tokenizer_config.json").string();
      try {
        cfg = ordered_json::parse(read_file(p));
      } catch (const nlohmann::json::exception& e) {
        throw rapid::FileError(p, std::string("invalid JSON: ") + e.what());
      }
    }
    bool has_tools = ctx.contains("tools") && !ctx["tools"].is_null();
    if (name.empty() && fs::exists(dir / "chat_template.jinja")) source = read_file((dir / "chat_template.jinja").string());
    else source = rapid::jinja::select_chat_template(cfg, has_tools, name);
    add_special_tokens(cfg, ctx);
  }

  rapid::jinja::RenderOptions opts;
  opts.now = a.now;
  rapid::jinja::ChatTemplate tpl(source);
  std::string out = tpl.render(ctx, opts);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

rapid::cli::Registrar reg("template", table, run);

}  // namespace
