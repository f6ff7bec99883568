// Subcommand registry: each src/cli/cmd_<name>.cpp registers itself with a static Registrar, so
// adding a subcommand touches no shared file. A command is an Args struct, a function that binds
// its flag table (cli/flags.h) to an Args, and a body that runs on the parsed Args.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/flags.h"

namespace rapid::cli {

using CommandFn = std::function<int(const std::vector<std::string>& args)>;

struct Command {
  std::string summary;
  CommandFn run;  // parses argv and runs; UsageError is reported here (exit 2)
  // The command's flag table, bound to a fresh Args (for tests and --help); empty for commands
  // that only forward their argv (serve/bench in rapid-mlx re-executing rapid-mlx-http).
  std::function<FlagTable()> table;
};

std::map<std::string, Command>& registry();

// Parses `args` with `table` and runs `body`; a UsageError (from the table or the body) is printed
// with the command's usage line and gives exit status 2; --help gives 0.
int run_parsed(const FlagTable& table, const std::vector<std::string>& args, const std::function<int()>& body);

struct Registrar {
  Registrar(const std::string& name, const std::string& summary, CommandFn fn) {
    registry()[name] = Command{summary, std::move(fn), {}};
  }
  // The one-line summary is the table's.
  template <class Args>
  Registrar(const std::string& name, FlagTable (*table)(Args&), int (*body)(Args&)) {
    CommandFn run = [table, body](const std::vector<std::string>& argv) {
      Args a;
      FlagTable t = table(a);
      return run_parsed(t, argv, [&] { return body(a); });
    };
    auto describe = [table] {
      auto a = std::make_shared<Args>();
      FlagTable t = table(*a);
      t.keep_alive(a);
      return t;
    };
    registry()[name] = Command{describe().summary(), std::move(run), std::move(describe)};
  }
};

}  // namespace rapid::cli
