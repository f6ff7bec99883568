#include <cstdio>
#include <exception>

#include "cli/command.h"

static void usage(std::FILE* out) {
  std::fprintf(out, "usage: rapid-mlx <command> [options]   ('rapid-mlx <command> --help' for its options)\n\ncommands:\n");
  for (auto& [name, cmd] : rapid::cli::registry())
    std::fprintf(out, "  %-12s %s\n", name.c_str(), cmd.summary.c_str());
}

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  auto& reg = rapid::cli::registry();
  auto it = reg.find(argv[1]);
  if (it == reg.end()) {
    rapid::cli::print_error("", std::string("unknown command '") + argv[1] + "'");
    usage(stderr);
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return it->second.run(args);
  } catch (const std::exception& e) {
    rapid::cli::print_error(argv[1], e.what());
    return 1;
  }
}
