#include <filesystem>

#include "common/error.h"
#include "tokenizer/loaders.h"

namespace rapid::tok {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    fs::path d(path);
    if (fs::exists(d / "tokenizer.json"))
      return tok::load_tokenizer_json((d / "tokenizer.json").string(), (d / "tokenizer_config.json").string());
    for (auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".gguf") return tok::load_tokenizer_gguf(e.path().string());
    throw FileError(path, "no tokenizer.json or .gguf file in this directory");
  }
  if (!fs::exists(path, ec)) throw FileError(path, "no such file or directory");
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return tok::load_tokenizer_gguf(path);
  auto cfg = fs::path(path).parent_path() / "tokenizer_config.json";
  return tok::load_tokenizer_json(path, cfg.string());
}

}  // namespace rapid::tok
