#include "cli/command.h"

#include <cstdio>

namespace rapid::cli {

std::map<std::string, Command>& registry() {
  static std::map<std::string, Command> r;
  return r;
}

int run_parsed(const FlagTable& table, const std::vector<std::string>& args, const std::function<int()>& body) {
  try {
    if (!table.parse(args)) return 0;  // --help
    return body();
  } catch (const UsageError& e) {
    print_error(table.command(), e.what());
    std::fprintf(stderr, "%s('rapid-mlx %s --help' lists every option)\n", table.usage().c_str(),
                 table.command().c_str());
    return 2;
  }
}

}  // namespace rapid::cli
