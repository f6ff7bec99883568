// Declarative command-line flags: each command lists its flags once, as a table of Flag entries
// bound to the fields they set, and the same table parses argv and writes the usage and --help
// text, so what a command documents and what it accepts cannot drift apart.
//
//   FlagTable t("serve", {
//       text("--model", "PATH", "a model directory or a .gguf file", &a.model).required(),
//       integer("--port", "N", "TCP port (0: any free one)", &a.port, 0, 65535),
//       choice("--kv-dtype", "KV cache element type", &a.kv, {{"f16", F16}, {"f32", F32}}),
//       flag("--no-prefix-cache", "turn the prefix cache off", &a.prefix_cache, false)});
//
// Defaults shown by --help are read from the bound fields before parsing (override with
// .default_is()). A flag given twice keeps its last value unless it is repeatable (then every
// value is kept). `--name=value` works as `--name value`; `--` ends the flags. Mistakes throw
// UsageError; run_command() prints them in one style (`rapid-mlx CMD: error: ...`, the usage line)
// and exits 2.
#pragma once
#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace rapid::cli {

// A command-line mistake (exit status 2), as opposed to a failure while running (status 1).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Flag {
  std::string name;                  // "--port"; for a positional argument its metavar ("PROMPT")
  std::vector<std::string> aliases;  // other spellings: "-m", "--tool-call-parser"
  std::string metavar;               // "N", "PATH", "f16|bf16|f32"; empty for a switch
  std::string help;
  std::string default_text;          // shown as "(default: ...)"; empty: nothing shown
  bool takes_value = true;
  bool positional = false;
  bool repeatable = false;
  bool is_required = false;
  std::vector<std::string> unless;   // a required flag is not, when one of these was given
  // Stores one value (a switch gets ""); returns what was wrong with it ("expected ..."), or "".
  std::function<std::string(const std::string&)> set;

  Flag& alias(std::string a) { aliases.push_back(std::move(a)); return *this; }
  Flag& required() { is_required = true; return *this; }
  Flag& required_unless(std::vector<std::string> others) {
    is_required = true;
    unless = std::move(others);
    return *this;
  }
  Flag& default_is(std::string text) { default_text = std::move(text); return *this; }
  Flag& as_positional() { positional = true; return *this; }
  Flag& many() { repeatable = true; return *this; }
};

class FlagTable {
 public:
  // `usage` overrides the generated synopsis (after "rapid-mlx CMD "), one line per form;
  // `notes` follow the option list in --help.
  FlagTable(std::string command, std::vector<Flag> flags, std::string summary = "",
            std::vector<std::string> usage = {}, std::string notes = "");

  // Applies argv to the bound fields. False when --help/-h was given (the help is then on stdout
  // and the command should exit 0). Throws UsageError.
  bool parse(const std::vector<std::string>& args) const;

  const std::string& command() const { return command_; }
  const std::string& summary() const { return summary_; }
  const std::vector<Flag>& flags() const { return flags_; }
  std::string usage() const;  // "usage: rapid-mlx CMD ..." (one line per form)
  std::string help() const;   // usage, summary, every flag with its help and default, notes
  // The flag named `name` (or with that alias), or nullptr.
  const Flag* find(const std::string& name) const;

  // Keeps `owner` (the fields the flags are bound to) alive as long as the table.
  void keep_alive(std::shared_ptr<void> owner) { owner_ = std::move(owner); }

 private:
  void apply(const Flag& f, const std::string& shown, const std::string& value) const;
  std::string suggestion(const std::string& unknown) const;

  std::string command_, summary_, notes_;
  std::vector<Flag> flags_;
  std::vector<std::string> usage_;
  std::shared_ptr<void> owner_;
};

// "rapid-mlx CMD: error: MESSAGE" on stderr (the one style for every failure of every command).
void print_error(const std::string& command, const std::string& message);

// ---- value parsing, shared by the flag builders (exposed for tests) ----

// Whole-string integer / floating point; nullopt when `s` is not one (or out of T's range).
template <class T>
std::optional<T> parse_number(const std::string& s) {
  T v{};
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || p != end) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>)
    if (v != v) return std::nullopt;  // nan
  return v;
}
std::string format_number(double v);     // "0.5", "inf"
std::string format_size(uint64_t bytes);  // "8GiB", "512MiB", "1000"
std::string quoted(const std::string& s);  // "\"x\"" (for error messages)
std::string real_range(double lo, double hi);  // " in 0..1", " >= 0" (infinite bounds left out)

namespace detail {
template <class T> struct Target { using type = T; static constexpr bool list = false; };
template <class T> struct Target<std::optional<T>> { using type = T; static constexpr bool list = false; };
template <class T> struct Target<std::vector<T>> { using type = T; static constexpr bool list = true; };

template <class F> using value_t = typename Target<F>::type;

template <class F, class V>
void store(F* field, V&& v) {
  if constexpr (Target<F>::list) field->push_back(std::forward<V>(v));
  else *field = std::forward<V>(v);
}
// The current value of `field` as --help shows it ("" when unset / empty).
template <class F, class Show>
std::string shown(const F* field, Show show) {
  if constexpr (Target<F>::list) return "";
  else if constexpr (std::is_same_v<F, std::optional<typename Target<F>::type>>)
    return *field ? show(**field) : "";
  else return show(*field);
}
Flag make(std::string name, std::string metavar, std::string help, bool repeatable,
          std::function<std::string(const std::string&)> set);
}  // namespace detail

// ---- builders: one per value type. The field may be T, std::optional<T> (unset by default, no
// default shown) or std::vector<T> (the flag is then repeatable). ----

// A switch without a value: sets *field = value.
Flag flag(std::string name, std::string help, bool* field, bool value = true);

// Any text.
template <class F>
Flag text(std::string name, std::string metavar, std::string help, F* field) {
  Flag f = detail::make(std::move(name), std::move(metavar), std::move(help), detail::Target<F>::list,
                        [field](const std::string& v) { detail::store(field, v); return std::string(); });
  f.default_text = detail::shown(field, [](const std::string& s) { return s; });
  return f;
}

// A whole number in [lo, hi].
template <class F>
Flag integer(std::string name, std::string metavar, std::string help, F* field,
             detail::value_t<F> lo = std::numeric_limits<detail::value_t<F>>::min(),
             detail::value_t<F> hi = std::numeric_limits<detail::value_t<F>>::max()) {
  using T = detail::value_t<F>;
  static_assert(std::is_integral_v<T>);
  Flag f = detail::make(std::move(name), std::move(metavar), std::move(help), detail::Target<F>::list,
                        [field, lo, hi](const std::string& v) {
                          std::optional<T> x = parse_number<T>(v);
                          if (!x || *x < lo || *x > hi) {
                            constexpr T kMin = std::numeric_limits<T>::min(), kMax = std::numeric_limits<T>::max();
                            std::string range = lo == kMin && hi == kMax && std::is_signed_v<T> ? ""
                                                : hi == kMax ? " >= " + std::to_string(lo)
                                                : lo == kMin ? " <= " + std::to_string(hi)
                                                : " in " + std::to_string(lo) + ".." + std::to_string(hi);
                            return "expected an integer" + range + ", got " + quoted(v);
                          }
                          detail::store(field, *x);
                          return std::string();
                        });
  f.default_text = detail::shown(field, [](T x) { return std::to_string(x); });
  return f;
}

// A number in [lo, hi] (decimal or exponent notation).
template <class F>
Flag real(std::string name, std::string metavar, std::string help, F* field, double lo, double hi) {
  Flag f = detail::make(std::move(name), std::move(metavar), std::move(help), detail::Target<F>::list,
                        [field, lo, hi](const std::string& v) {
                          std::optional<double> x = parse_number<double>(v);
                          if (!x || *x < lo || *x > hi) return "expected a number" + real_range(lo, hi) + ", got " + quoted(v);
                          detail::store(field, *x);
                          return std::string();
                        });
  f.default_text = detail::shown(field, [](double x) { return format_number(x); });
  return f;
}

// One of the named values; the metavar lists the names ("f16|bf16|f32").
template <class F>
Flag choice(std::string name, std::string help, F* field,
            std::vector<std::pair<std::string, detail::value_t<F>>> names) {
  using T = detail::value_t<F>;
  std::string meta, list;
  for (const auto& [n, v] : names) {
    meta += (meta.empty() ? "" : "|") + n;
    list += (list.empty() ? "" : ", ") + n;
  }
  Flag f = detail::make(std::move(name), meta, std::move(help), detail::Target<F>::list,
                        [field, names, list](const std::string& v) {
                          for (const auto& [n, x] : names)
                            if (n == v) { detail::store(field, x); return std::string(); }
                          return "expected one of " + list + ", got " + quoted(v);
                        });
  f.default_text = detail::shown(field, [names](const T& x) {
    for (const auto& [n, v] : names)
      if (v == x) return n;
    return std::string();
  });
  return f;
}

// A byte count: "2GiB", "512MiB", "1.5G", "4096" or a fraction of `ram` ("0.25"), as
// cache::parse_memory_size reads it.
template <class F>
Flag size(std::string name, std::string metavar, std::string help, F* field, uint64_t ram);

// A comma-separated list of integers in [lo, hi] ("1,4,8,16"), replacing the field's default.
Flag integer_list(std::string name, std::string metavar, std::string help, std::vector<int>* field, int lo, int hi);

// A comma-separated list of words (spaces around each dropped, empty items skipped), appended.
Flag word_list(std::string name, std::string metavar, std::string help, std::vector<std::string>* field);

// Anything else: `set` stores the value or returns what is wrong with it.
Flag custom(std::string name, std::string metavar, std::string help,
            std::function<std::string(const std::string&)> set);

// Parses bytes as above; "expected a size ..." on failure.
std::string parse_size(const std::string& v, uint64_t ram, uint64_t& out);

template <class F>
Flag size(std::string name, std::string metavar, std::string help, F* field, uint64_t ram) {
  Flag f = detail::make(std::move(name), std::move(metavar), std::move(help), detail::Target<F>::list,
                        [field, ram](const std::string& v) {
                          uint64_t bytes = 0;
                          std::string err = parse_size(v, ram, bytes);
                          if (err.empty()) detail::store(field, bytes);
                          return err;
                        });
  f.default_text = detail::shown(field, [](uint64_t b) { return format_size(b); });
  return f;
}

}  // namespace rapid::cli
