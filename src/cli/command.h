// Subcommand registry: each src/cli/cmd_<name>.cpp registers itself with a static Registrar, so
// adding a subcommand touches no shared file.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace rapid::cli {

using CommandFn = std::function<int(const std::vector<std::string>& args)>;

struct Command {
  std::string summary;
  CommandFn run;
};

std::map<std::string, Command>& registry();

struct Registrar {
  Registrar(const std::string& name, const std::string& summary, CommandFn fn) {
    registry()[name] = Command{summary, std::move(fn)};
  }
};

}  // namespace rapid::cli
