// `rapid-mlx template`: renders a chat template over a conversation, to check what prompt a model
// will see. The template comes from a model directory (chat_template.jinja or the chat_template of
// tokenizer_config.json, as transformers picks it) or from a file.
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "template/chat_template.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

const char* kUsage =
    "usage: rapid-mlx template (--model-dir DIR | --template FILE) --context FILE.json\n"
    "                          [--name TEMPLATE_NAME] [--now 'YYYY-MM-DD HH:MM:SS']\n"
    "  --context: JSON object with messages, optional tools, add_generation_prompt, bos_token,\n"
    "             eos_token and extra variables (enable_thinking, ...); '-' reads stdin.\n"
    "  --name:    pick a named template when tokenizer_config.json holds several.\n"
    "  --now:     the time strftime_now sees (default: now).\n";

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

int run(const std::vector<std::string>& args) {
  std::string model_dir, template_file, context_file, name, now;
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw rapid::Error(args[i] + " needs a value");
      return args[++i];
    };
    if (args[i] == "--model-dir") model_dir = value();
    else if (args[i] == "--template") template_file = value();
    else if (args[i] == "--context") context_file = value();
    else if (args[i] == "--name") name = value();
    else if (args[i] == "--now") now = value();
    else if (args[i] == "-h" || args[i] == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "unknown option '%s'\n%s", args[i].c_str(), kUsage);
      return 2;
    }
  }
  if (model_dir.empty() == template_file.empty() || context_file.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
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
    else source = rapid::select_chat_template(cfg, has_tools, name);
    add_special_tokens(cfg, ctx);
  }

  rapid::RenderOptions opts;
  if (!now.empty()) {
    std::tm tm{};
    std::istringstream in(now);
    in >> std::get_time(&tm, "%Y-%m-%d %H:%M:%S");
    if (in.fail()) throw rapid::Error("--now must look like 'YYYY-MM-DD HH:MM:SS'");
    std::tm probe = tm;
    timegm(&probe);  // fills weekday and day of year
    tm.tm_wday = probe.tm_wday;
    tm.tm_yday = probe.tm_yday;
    opts.now = tm;
  }
  rapid::ChatTemplate tpl(source);
  std::string out = tpl.render(ctx, opts);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

rapid::cli::Registrar reg("template", "render a chat template over a conversation (JSON)", run);

}  // namespace
