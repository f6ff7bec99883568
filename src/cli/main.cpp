#include <cstdio>
#include <exception>

#include "cli/command.h"

namespace rapid::cli {
std::map<std::string, Command>& registry() {
  static std::map<std::string, Command> r;
  return r;
}
}  // namespace rapid::cli

static void usage() {
  std::fprintf(stderr, "usage: rapid-mlx <command> [options]\n\ncommands:\n");
  for (auto& [name, cmd] : rapid::cli::registry())
    std::fprintf(stderr, "  %-12s %s\n", name.c_str(), cmd.summary.c_str());
}

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  auto& reg = rapid::cli::registry();
  auto it = reg.find(argv[1]);
  if (it == reg.end()) {
    std::fprintf(stderr, "rapid-mlx: unknown command '%s'\n", argv[1]);
    usage();
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return it->second.run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rapid-mlx %s: error: %s\n", argv[1], e.what());
    return 1;
  }
}
