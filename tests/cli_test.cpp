// The command line: the flag tables (cli/flags.h) parse every value type as documented, refuse bad
// input in one style, and generate help that lists every flag; every command's table is checked
// for clashes; and the flags docs/api.md and README.md document for each command are exactly the
// ones its table accepts (the docs are parsed, so neither side can drift).
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include "cli/command.h"
#include "cli/flags.h"

using namespace rapid::cli;

namespace {

// The UsageError message `parse` throws for `args`, or "" when it parses.
std::string parse_error(const FlagTable& t, std::vector<std::string> args) {
  try {
    t.parse(args);
    return "";
  } catch (const UsageError& e) {
    return e.what();
  }
}

std::string read_doc(const std::string& rel) {
  std::ifstream f(std::string(RAPID_SOURCE_DIR) + "/" + rel);
  EXPECT_TRUE(f) << rel;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::set<std::string> flags_in(const std::string& text) {
  std::set<std::string> out;
  static const std::regex flag_re(R"((^|[^A-Za-z0-9-])(--[a-z][a-z0-9-]*))");
  for (std::sregex_iterator it(text.begin(), text.end(), flag_re), end; it != end; ++it) out.insert((*it)[2]);
  return out;
}

FlagTable command_table(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end() || !it->second.table) throw std::runtime_error("no command " + name);
  return it->second.table();
}

struct Opts {
  std::string model, host = "127.0.0.1";
  int port = 8000;
  std::optional<int64_t> ctx;
  std::vector<uint64_t> seeds;
  double temp = 0.7;
  std::optional<double> top_p;
  int kv = 16;
  uint64_t disk = 8ull << 30;
  std::optional<uint64_t> kv_memory;
  std::vector<int> levels{1, 4};
  std::vector<std::string> origins, aliases;
  bool prefix = true, raw = false;
  std::optional<std::string> prompt;
  std::vector<int32_t> ids;
  std::string checked;
};

constexpr uint64_t kRam = 64ull << 30;

FlagTable opts_table(Opts& o, bool with_prompt = true) {
  std::vector<Flag> f = {
      text("--model", "PATH", "model", &o.model).alias("-m").required(),
      text("--host", "HOST", "address", &o.host),
      integer("--port", "N", "TCP port", &o.port, 0, 65535),
      integer("--ctx", "N", "context", &o.ctx, 16, int64_t(1) << 24).default_is("the model's"),
      integer("--seed", "S", "seeds", &o.seeds),
      real("--temperature", "T", "temperature", &o.temp, 0, std::numeric_limits<double>::infinity()),
      real("--top-p", "P", "nucleus", &o.top_p, 0, 1),
      choice("--kv-dtype", "element type", &o.kv, {{"f16", 16}, {"bf16", 17}, {"f32", 32}}),
      size("--cache-disk-limit", "SIZE", "disk", &o.disk, kRam),
      size("--kv-cache-memory", "SIZE", "pool", &o.kv_memory, kRam),
      integer_list("--concurrency", "N,...", "levels", &o.levels, 1, 256),
      word_list("--allowed-origins", "LIST", "origins", &o.origins),
      text("--model-alias", "P=N", "aliases", &o.aliases),
      flag("--no-prefix-cache", "no prefix cache", &o.prefix, false),
      flag("--raw", "raw prompt", &o.raw),
      custom("--checked", "X", "must be ok",
             [&o](const std::string& v) { return v == "ok" ? (o.checked = v, std::string()) : "not ok"; }),
  };
  if (with_prompt) f.push_back(text("PROMPT", "", "the prompt", &o.prompt).as_positional());
  return FlagTable("serve", std::move(f), "a test table");
}

}  // namespace

TEST(CliFlags, ParsesEveryType) {
  Opts o;
  FlagTable t = opts_table(o);
  ASSERT_TRUE(t.parse({"-m", "m.gguf", "--host=0.0.0.0", "--port", "0", "--ctx", "16", "--seed", "18446744073709551615",
                       "--seed", "0", "--temperature", "1e-1", "--top-p", "1", "--kv-dtype", "f32",
                       "--cache-disk-limit", "512MiB", "--kv-cache-memory", "0.25", "--concurrency", "1,8,256",
                       "--allowed-origins", " http://a , *,,", "--allowed-origins", "http://b", "--model-alias",
                       "x=m", "--model-alias", "y*=m", "--no-prefix-cache", "--raw", "--checked", "ok", "hello"}));
  EXPECT_EQ(o.model, "m.gguf");
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.port, 0);
  EXPECT_EQ(o.ctx, 16);
  EXPECT_EQ(o.seeds, (std::vector<uint64_t>{18446744073709551615ull, 0}));
  EXPECT_DOUBLE_EQ(o.temp, 0.1);
  EXPECT_EQ(o.top_p, 1.0);
  EXPECT_EQ(o.kv, 32);
  EXPECT_EQ(o.disk, 512ull << 20);
  EXPECT_EQ(o.kv_memory, kRam / 4);
  EXPECT_EQ(o.levels, (std::vector<int>{1, 8, 256}));
  EXPECT_EQ(o.origins, (std::vector<std::string>{"http://a", "*", "http://b"}));
  EXPECT_EQ(o.aliases, (std::vector<std::string>{"x=m", "y*=m"}));
  EXPECT_FALSE(o.prefix);
  EXPECT_TRUE(o.raw);
  EXPECT_EQ(o.checked, "ok");
  EXPECT_EQ(o.prompt, "hello");
}

TEST(CliFlags, AbsentFlagsKeepTheirDefaults) {
  Opts o;
  FlagTable t = opts_table(o);
  ASSERT_TRUE(t.parse({"--model", "m", "--port", "1", "--port", "9"}));  // the last value wins
  EXPECT_EQ(o.port, 9);
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_FALSE(o.ctx);
  EXPECT_FALSE(o.kv_memory);
  EXPECT_FALSE(o.prompt);
  EXPECT_EQ(o.disk, 8ull << 30);
  EXPECT_EQ(o.levels, (std::vector<int>{1, 4}));
  EXPECT_TRUE(o.prefix);
  EXPECT_DOUBLE_EQ(o.temp, 0.7);
}

TEST(CliFlags, RefusesBadValuesWithTheFlagTheRangeAndTheValue) {
  Opts o;
  FlagTable t = opts_table(o);
  auto err = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--model", "m"});
    return parse_error(t, extra);
  };
  EXPECT_EQ(err({"--port", "x"}), "--port: expected an integer in 0..65535, got \"x\"");
  EXPECT_EQ(err({"--port", "65536"}), "--port: expected an integer in 0..65535, got \"65536\"");
  EXPECT_EQ(err({"--port", "-1"}), "--port: expected an integer in 0..65535, got \"-1\"");
  EXPECT_EQ(err({"--port", "80 "}), "--port: expected an integer in 0..65535, got \"80 \"");
  EXPECT_EQ(err({"--port", ""}), "--port: expected an integer in 0..65535, got \"\"");
  EXPECT_EQ(err({"--ctx", "15"}), "--ctx: expected an integer in 16..16777216, got \"15\"");
  EXPECT_EQ(err({"--seed", "-1"}), "--seed: expected an integer >= 0, got \"-1\"");
  EXPECT_EQ(err({"--seed", "18446744073709551616"}), "--seed: expected an integer >= 0, got \"18446744073709551616\"");
  EXPECT_EQ(err({"--temperature", "-0.5"}), "--temperature: expected a number >= 0, got \"-0.5\"");
  EXPECT_EQ(err({"--top-p", "nan"}), "--top-p: expected a number in 0..1, got \"nan\"");
  EXPECT_EQ(err({"--top-p", "1.01"}), "--top-p: expected a number in 0..1, got \"1.01\"");
  EXPECT_EQ(err({"--kv-dtype", "f8"}), "--kv-dtype: expected one of f16, bf16, f32, got \"f8\"");
  EXPECT_NE(err({"--cache-disk-limit", "2XB"}).find("--cache-disk-limit: expected a size"), std::string::npos);
  EXPECT_NE(err({"--kv-cache-memory", "0"}).find("got \"0\""), std::string::npos);
  EXPECT_EQ(err({"--concurrency", "1,,2"}),
            "--concurrency: expected a comma-separated list of integers in 1..256, got \"1,,2\"");
  EXPECT_EQ(err({"--concurrency", "0"}), "--concurrency: expected a comma-separated list of integers in 1..256, got \"0\"");
  EXPECT_EQ(err({"--checked", "no"}), "--checked: not ok");
  EXPECT_EQ(err({"--raw=1"}), "--raw: takes no value");
  EXPECT_EQ(err({"--port"}), "--port: needs a value (N)");
  EXPECT_EQ(err({"a", "b"}), "unexpected argument \"b\"");
  EXPECT_EQ(parse_error(t, {"--port", "1"}), "--model is required");
}

TEST(CliFlags, UnknownFlagsGetTheNearestName) {
  Opts o;
  FlagTable t = opts_table(o);
  EXPECT_EQ(parse_error(t, {"--prot", "1"}), "unknown option --prot (did you mean --port?)");
  EXPECT_EQ(parse_error(t, {"--kv-dtyp", "f16"}), "unknown option --kv-dtyp (did you mean --kv-dtype?)");
  EXPECT_EQ(parse_error(t, {"--no-prefix-cach"}), "unknown option --no-prefix-cach (did you mean --no-prefix-cache?)");
  EXPECT_EQ(parse_error(t, {"--zzzzzzzz"}), "unknown option --zzzzzzzz");
  EXPECT_EQ(parse_error(t, {"-x"}), "unknown option -x");
  EXPECT_EQ(parse_error(t, {"--bogus=3"}), "unknown option --bogus");
}

TEST(CliFlags, Positionals) {
  Opts o;
  FlagTable t = opts_table(o);
  ASSERT_TRUE(t.parse({"--model", "m", "--", "--port"}));  // after "--" everything is an argument
  EXPECT_EQ(o.prompt, "--port");
  EXPECT_EQ(o.port, 8000);
  Opts o2;
  FlagTable t2 = opts_table(o2);
  ASSERT_TRUE(t2.parse({"-", "--model", "m"}));  // "-" is an argument (stdin, by convention)
  EXPECT_EQ(o2.prompt, "-");

  Opts o3;
  FlagTable ids("detokenize", {integer("IDS", "", "ids", &o3.ids).as_positional(), flag("--raw", "", &o3.raw)});
  ASSERT_TRUE(ids.parse({"5", "-3", "--raw", "7"}));  // a negative number is a value, not a flag
  EXPECT_EQ(o3.ids, (std::vector<int32_t>{5, -3, 7}));
  EXPECT_TRUE(o3.raw);
  EXPECT_EQ(parse_error(ids, {"5", "x"}), "IDS: expected an integer, got \"x\"");
  EXPECT_EQ(parse_error(ids, {"2147483648"}), "IDS: expected an integer, got \"2147483648\"");
  FlagTable needs("x", {integer("IDS", "", "ids", &o3.ids).as_positional().required()});
  EXPECT_EQ(parse_error(needs, {}), "IDS is required");
}

TEST(CliFlags, HelpIsGeneratedFromTheTable) {
  Opts o;
  o.port = 9123;  // the defaults shown are the fields' values when the table is built
  FlagTable t = opts_table(o);
  Opts o2;
  FlagTable t2 = opts_table(o2);
  testing::internal::CaptureStdout();
  EXPECT_FALSE(t2.parse({"-h"}));
  std::string help = testing::internal::GetCapturedStdout();
  EXPECT_EQ(help, t2.help());
  EXPECT_EQ(help.rfind("usage: rapid-mlx serve --model PATH [options] [PROMPT]\n", 0), 0u) << help;
  for (const Flag& f : t2.flags()) {
    EXPECT_NE(help.find(f.name), std::string::npos) << f.name;
    for (const std::string& a : f.aliases) EXPECT_NE(help.find(a), std::string::npos) << a;
  }
  EXPECT_NE(t.help().find("--port N"), std::string::npos);
  EXPECT_NE(t.help().find("(default: 9123)"), std::string::npos) << t.help();
  EXPECT_NE(help.find("(default: 8000)"), std::string::npos);
  EXPECT_NE(help.find("(default: 8GiB)"), std::string::npos);            // sizes in binary units
  EXPECT_NE(help.find("(default: f16)"), std::string::npos);             // a choice by its name
  EXPECT_NE(help.find("(default: 1,4)"), std::string::npos);             // a list
  EXPECT_NE(help.find("(default: the model's)"), std::string::npos);     // an explicit text
  EXPECT_NE(help.find("--kv-dtype f16|bf16|f32"), std::string::npos);    // choices as the metavar
  EXPECT_NE(help.find("-m, --model PATH"), std::string::npos);
  EXPECT_NE(help.find("(required)"), std::string::npos);
  EXPECT_NE(help.find("  -h, --help"), std::string::npos);
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
}

TEST(CliFlags, ATableRefusesTwoFlagsOfOneName) {
  bool b = false;
  std::string s;
  EXPECT_THROW(FlagTable("x", {flag("--a", "", &b), text("--a", "V", "", &s)}), std::logic_error);
  EXPECT_THROW(FlagTable("x", {flag("--a", "", &b), text("--b", "V", "", &s).alias("--a")}), std::logic_error);
  EXPECT_THROW(FlagTable("x", {flag("--help", "", &b)}), std::logic_error);
}

TEST(CliFlags, FormatsNumbersAndSizes) {
  EXPECT_EQ(format_size(8ull << 30), "8GiB");
  EXPECT_EQ(format_size(512ull << 20), "512MiB");
  EXPECT_EQ(format_size(1536), "1536");
  EXPECT_EQ(format_size(3ull << 40), "3TiB");
  EXPECT_EQ(format_number(0.5), "0.5");
  EXPECT_EQ(real_range(0, std::numeric_limits<double>::infinity()), " >= 0");
  EXPECT_EQ(parse_number<int>("12"), 12);
  EXPECT_FALSE(parse_number<int>("12a"));
  EXPECT_FALSE(parse_number<int>("+12"));
  EXPECT_FALSE(parse_number<unsigned>("-1"));
}

// ---- the real commands ----

const std::vector<std::string> kCommands = {"bench", "chat", "convert", "detokenize", "ls", "parse", "ps", "pull",
                                            "rm", "run", "serve", "template", "tokenize"};

TEST(CliCommands, EveryCommandHasACleanTableAndHelpListingEveryFlag) {
  for (const std::string& name : kCommands) {
    SCOPED_TRACE(name);
    FlagTable t = command_table(name);
    EXPECT_EQ(t.command(), name);
    EXPECT_FALSE(t.summary().empty());
    std::set<std::string> seen;
    for (const Flag& f : t.flags()) {
      EXPECT_TRUE(seen.insert(f.name).second) << f.name;
      for (const std::string& a : f.aliases) EXPECT_TRUE(seen.insert(a).second) << a;
      EXPECT_FALSE(f.help.empty()) << f.name;
      if (!f.positional) EXPECT_EQ(f.name.rfind("-", 0), 0u) << f.name;
      if (f.takes_value && !f.positional) EXPECT_FALSE(f.metavar.empty()) << f.name;
    }
    std::string help = t.help();
    EXPECT_EQ(help.rfind("usage: rapid-mlx " + name + " ", 0), 0u) << help;
    for (const std::string& n : seen) EXPECT_NE(help.find(n), std::string::npos) << n;
    for (const Flag& f : t.flags())
      if (f.is_required && !f.positional) EXPECT_NE(t.usage().find(f.name), std::string::npos) << f.name;
  }
  EXPECT_EQ(registry().size(), kCommands.size());
}

TEST(CliCommands, ServeKeepsItsFlagsMeaningsAndDefaults) {
  // The names, ranges and defaults of docs/api.md, checked through the real table.
  FlagTable t = command_table("serve");
  std::string help = std::regex_replace(t.help(), std::regex("\\s+"), " ");  // as if unwrapped
  for (const char* d : {"--port N", "(default: 8000)", "(default: 127.0.0.1)", "(default: 128)", "(default: 1024)",
                        "(default: 16)", "(default: 512)", "(default: 8GiB)", "(default: auto)", "(default: 8)",
                        "(default: 192)", "(default: info)", "(default: f16)", "(default: 16777216)"})
    EXPECT_NE(help.find(d), std::string::npos) << d;
  EXPECT_EQ(parse_error(t, {"--model", "m", "--port", "x"}), "--port: expected an integer in 0..65535, got \"x\"");
  EXPECT_EQ(parse_error(t, {"--model", "m", "--max-num-seqs", "0"}),
            "--max-num-seqs: expected an integer in 1..4096, got \"0\"");
  EXPECT_EQ(parse_error(t, {"--model", "m", "--speculative", "medusa"}),
            "--speculative: expected one of auto, off, ngram, draft, mtp, got \"medusa\"");
  EXPECT_EQ(parse_error(t, {"--model", "m", "--api-key-file", "/nonexistent/key"}),
            "--api-key-file: cannot read /nonexistent/key: No such file or directory");
  EXPECT_EQ(parse_error(t, {"--port", "8000"}), "--model is required");
  EXPECT_EQ(parse_error(t, {"--model", "m", "--max-conections", "20"}),
            "unknown option --max-conections (did you mean --max-connections?)");
}

TEST(CliCommands, ABadCommandLineExitsTwoWithOneErrorStyle) {
  // Through the registry as main() runs it: nothing is loaded before the flags are checked.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"serve", {"--model", "m", "--port", "x"}}, {"run", {"--model", "m", "--top-k", "4.5"}},
      {"convert", {"--from", "x"}},                {"bench", {"--repeats", "x"}},
      {"tokenize", {"--bogus"}},                   {"detokenize", {"--tokenizer", "t", "x"}},
      {"parse", {"--chunks", "-1"}},               {"template", {"--context", "c.json", "--now", "soon"}},
  };
  for (const auto& [name, args] : cases) {
    SCOPED_TRACE(name);
    testing::internal::CaptureStderr();
    int rc = registry().at(name).run(args);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 2);
    EXPECT_EQ(err.rfind("rapid-mlx " + name + ": error: ", 0), 0u) << err;
    EXPECT_NE(err.find("\nusage: rapid-mlx " + name + " "), std::string::npos) << err;
  }
  for (const std::string& name : kCommands) {
    testing::internal::CaptureStdout();
    EXPECT_EQ(registry().at(name).run({"--help"}), 0) << name;
    EXPECT_EQ(testing::internal::GetCapturedStdout(), command_table(name).help()) << name;
  }
}

// docs/api.md documents `serve` from its top to "### HTTP limits": every flag named there must be
// in the table and every flag of the table must be named there.
TEST(CliDocs, ServeFlagsInApiMdMatchTheTable) {
  std::string doc = read_doc("docs/api.md");
  size_t end = doc.find("### HTTP limits");
  ASSERT_NE(end, std::string::npos);
  std::set<std::string> documented = flags_in(doc.substr(0, end));
  documented.erase("--help");  // every command's, outside the tables
  FlagTable t = command_table("serve");
  for (const std::string& f : documented) EXPECT_TRUE(t.find(f)) << f << " is in docs/api.md but serve has no such flag";
  for (const Flag& f : t.flags())
    EXPECT_TRUE(documented.count(f.name)) << f.name << " is a serve flag docs/api.md does not document";
}

// README.md's command table: each row's flags belong to that row's command(s).
TEST(CliDocs, ReadmeCommandTableNamesRealFlags) {
  std::string doc = read_doc("README.md");
  static const std::regex row_re(R"(\n\| `rapid-mlx ([a-z]+)([^|`]*(?:\\\|[^|`]*)*)`)");
  int rows = 0;
  for (std::sregex_iterator it(doc.begin(), doc.end(), row_re), end; it != end; ++it, ++rows) {
    FlagTable t = command_table((*it)[1]);
    for (const std::string& f : flags_in((*it)[2]))
      EXPECT_TRUE(t.find(f)) << "README.md: rapid-mlx " << (*it)[1] << " has no flag " << f;
  }
  EXPECT_GE(rows, 7);
}
