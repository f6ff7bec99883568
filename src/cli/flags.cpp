#include "cli/flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "cache/block_pool.h"
#include "common/error.h"

namespace rapid::cli {

namespace {
// "a", "a or b", "a, b or c".
std::string join_or(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
  return s;
}

constexpr size_t kWidth = 100;      // help lines are wrapped here
constexpr size_t kNameColumn = 30;  // flags longer than this put their help on the next line

// "-x", "--name" (but not "-", and not a negative number, which is a value).
bool looks_like_flag(const std::string& a) {
  return a.size() >= 2 && a[0] == '-' && !parse_number<double>(a);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// `text` word-wrapped to `width` columns, continuation lines indented by `indent` spaces.
std::string wrap(const std::string& text, size_t indent, size_t first_column) {
  std::string out;
  size_t col = first_column;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(' ', i);
    if (j == std::string::npos) j = text.size();
    std::string word = text.substr(i, j - i);
    if (col > indent && col + 1 + word.size() > kWidth) {
      out += "\n" + std::string(indent, ' ');
      col = indent;
    } else if (col > indent) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
    i = j + 1;
  }
  return out;
}

// "--model PATH", "-m, --model PATH" for the option list.
std::string left_column(const Flag& f) {
  std::string s;
  for (const std::string& a : f.aliases)
    if (a.size() == 2) s += a + ", ";  // short aliases first, as in most tools
  s += f.name;
  for (const std::string& a : f.aliases)
    if (a.size() != 2) s += ", " + a;
  if (f.takes_value && !f.positional) s += " " + f.metavar;
  if (f.repeatable) s += " ...";
  return s;
}

}  // namespace

namespace detail {
Flag make(std::string name, std::string metavar, std::string help, bool repeatable,
          std::function<std::string(const std::string&)> set) {
  Flag f;
  f.name = std::move(name);
  f.metavar = std::move(metavar);
  f.help = std::move(help);
  f.repeatable = repeatable;
  f.set = std::move(set);
  return f;
}
}  // namespace detail

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string real_range(double lo, double hi) {
  bool open_lo = std::isinf(lo), open_hi = std::isinf(hi);
  if (open_lo && open_hi) return "";
  if (open_hi) return " >= " + format_number(lo);
  if (open_lo) return " <= " + format_number(hi);
  return " in " + format_number(lo) + ".." + format_number(hi);
}

std::string format_size(uint64_t bytes) {
  static const char* units[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; ++i) {
    uint64_t unit = 1ull << (10 * (4 - i));
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + units[i];
  }
  return std::to_string(bytes);
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

void print_error(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "rapid-mlx%s%s: error: %s\n", command.empty() ? "" : " ", command.c_str(), message.c_str());
}

std::string parse_size(const std::string& v, uint64_t ram, uint64_t& out) {
  try {
    out = cache::parse_memory_size(v, ram);
    return "";
  } catch (const Error&) {
    return "expected a size (bytes with an optional K/M/G/T or KiB/MiB/GiB/TiB suffix, or a fraction "
           "of RAM such as 0.25), got " + quoted(v);
  }
}

Flag flag(std::string name, std::string help, bool* field, bool value) {
  Flag f = detail::make(std::move(name), "", std::move(help), false, [field, value](const std::string&) {
    *field = value;
    return std::string();
  });
  f.takes_value = false;
  return f;
}

Flag integer_list(std::string name, std::string metavar, std::string help, std::vector<int>* field, int lo, int hi) {
  std::string shown;
  for (int x : *field) shown += (shown.empty() ? "" : ",") + std::to_string(x);
  Flag f = detail::make(std::move(name), std::move(metavar), std::move(help), false,
                        [field, lo, hi](const std::string& v) {
                          std::vector<int> out;
                          for (size_t p = 0; p <= v.size();) {
                            size_t q = std::min(v.find(',', p), v.size());
                            std::optional<int> x = parse_number<int>(v.substr(p, q - p));
                            if (!x || *x < lo || *x > hi)
                              return "expected a comma-separated list of integers in " + std::to_string(lo) + ".." +
                                     std::to_string(hi) + ", got " + quoted(v);
                            out.push_back(*x);
                            p = q + 1;
                          }
                          *field = std::move(out);
                          return std::string();
                        });
  f.default_text = shown;
  return f;
}

Flag word_list(std::string name, std::string metavar, std::string help, std::vector<std::string>* field) {
  return detail::make(std::move(name), std::move(metavar), std::move(help), false, [field](const std::string& v) {
    for (size_t p = 0; p <= v.size();) {
      size_t q = std::min(v.find(',', p), v.size());
      std::string w = v.substr(p, q - p);
      w.erase(0, std::min(w.size(), w.find_first_not_of(' ')));
      w.erase(w.find_last_not_of(' ') + 1);
      if (!w.empty()) field->push_back(w);
      p = q + 1;
    }
    return std::string();
  });
}

Flag custom(std::string name, std::string metavar, std::string help,
            std::function<std::string(const std::string&)> set) {
  return detail::make(std::move(name), std::move(metavar), std::move(help), false, std::move(set));
}

FlagTable::FlagTable(std::string command, std::vector<Flag> flags, std::string summary,
                     std::vector<std::string> usage, std::string notes)
    : command_(std::move(command)), summary_(std::move(summary)), notes_(std::move(notes)),
      flags_(std::move(flags)), usage_(std::move(usage)) {
  // A table is written once per command: a clash is a programming error, caught by every run.
  std::set<std::string> names{"-h", "--help"};
  bool open_positional = false;
  for (const Flag& f : flags_) {
    std::vector<std::string> all = f.aliases;
    all.push_back(f.name);
    for (const std::string& n : all)
      if (!names.insert(n).second) throw std::logic_error("rapid-mlx " + command_ + ": flag " + n + " listed twice");
    if (f.positional && open_positional)
      throw std::logic_error("rapid-mlx " + command_ + ": positional " + f.name + " after a repeatable one");
    if (f.positional && f.repeatable) open_positional = true;
  }
}

const Flag* FlagTable::find(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
    for (const std::string& a : f.aliases)
      if (a == name) return &f;
  }
  return nullptr;
}

std::string FlagTable::suggestion(const std::string& unknown) const {
  std::string best;
  size_t best_d = unknown.size() / 3 + 1;  // a third of the letters wrong at most: "--prot" -> "--port"
  for (const Flag& f : flags_) {
    if (f.positional) continue;
    std::vector<std::string> all = f.aliases;
    all.push_back(f.name);
    for (const std::string& n : all)
      if (size_t d = edit_distance(unknown, n); d < best_d) best_d = d, best = f.name;
  }
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

void FlagTable::apply(const Flag& f, const std::string& shown, const std::string& value) const {
  std::string err = f.set(value);
  if (!err.empty()) throw UsageError(shown + ": " + err);
}

bool FlagTable::parse(const std::vector<std::string>& args) const {
  std::vector<const Flag*> positionals;
  for (const Flag& f : flags_)
    if (f.positional) positionals.push_back(&f);
  std::set<const Flag*> seen;
  size_t next_positional = 0;
  bool only_positionals = false;  // after "--"
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!only_positionals && a == "--") {
      only_positionals = true;
    } else if (!only_positionals && looks_like_flag(a)) {
      if (a == "-h" || a == "--help") {
        std::fputs(help().c_str(), stdout);
        return false;
      }
      size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
      std::string name = a.substr(0, eq);
      const Flag* f = find(name);
      if (!f || f->positional) throw UsageError("unknown option " + name + suggestion(name));
      if (!f->takes_value && eq != std::string::npos) throw UsageError(name + ": takes no value");
      if (f->takes_value && eq == std::string::npos && i + 1 >= args.size())
        throw UsageError(name + ": needs a value (" + f->metavar + ")");
      apply(*f, name, !f->takes_value ? "" : eq != std::string::npos ? a.substr(eq + 1) : args[++i]);
      seen.insert(f);
    } else {
      if (next_positional >= positionals.size()) throw UsageError("unexpected argument " + quoted(a));
      const Flag* p = positionals[next_positional];
      apply(*p, p->name, a);
      seen.insert(p);
      if (!p->repeatable) ++next_positional;
    }
  }
  for (const Flag& f : flags_)
    if (f.is_required && !seen.count(&f) &&
        std::none_of(f.unless.begin(), f.unless.end(), [&](const std::string& o) { return seen.count(find(o)); }))
      throw UsageError(f.name + " is required");
  return true;
}

std::string FlagTable::usage() const {
  std::vector<std::string> forms = usage_;
  if (forms.empty()) {
    std::string s;
    for (const Flag& f : flags_)
      if (f.is_required && !f.positional) s += f.name + " " + f.metavar + " ";
    s += "[options]";
    for (const Flag& f : flags_) {
      if (!f.positional) continue;
      std::string p = f.name + (f.repeatable ? "..." : "");
      s += " " + (f.is_required ? p : "[" + p + "]");
    }
    forms.push_back(s);
  }
  std::string out;
  for (size_t i = 0; i < forms.size(); ++i)
    out += std::string(i ? "       " : "usage: ") + "rapid-mlx " + command_ + " " + forms[i] + "\n";
  return out;
}

std::string FlagTable::help() const {
  std::string out = usage();
  if (!summary_.empty()) out += "\n" + wrap(summary_, 0, 0) + "\n";
  auto section = [&](bool positional) {
    std::string s;
    for (const Flag& f : flags_) {
      if (f.positional != positional) continue;
      std::string left = "  " + left_column(f);
      std::string text = f.help;
      if (f.is_required) text += f.unless.empty() ? " (required)" : " (required unless " + join_or(f.unless) + ")";
      if (!f.default_text.empty()) text += " (default: " + f.default_text + ")";
      if (left.size() + 2 > kNameColumn) {
        s += left + "\n" + std::string(kNameColumn, ' ');
      } else {
        s += left + std::string(kNameColumn - left.size(), ' ');
      }
      s += wrap(text, kNameColumn, kNameColumn) + "\n";
    }
    return s;
  };
  if (std::string p = section(true); !p.empty()) out += "\narguments:\n" + p;
  out += "\noptions:\n" + section(false);
  out += "  -h, --help" + std::string(kNameColumn - 12, ' ') + "this help\n";
  if (!notes_.empty()) out += "\n" + notes_ + (notes_.back() == '\n' ? "" : "\n");
  return out;
}

}  // namespace rapid::cli
