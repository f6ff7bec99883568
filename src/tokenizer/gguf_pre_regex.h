// llama.cpp's pre-tokenizer regexes by GGUF `tokenizer.ggml.pre` name. Each list is applied in
// order, every regex splitting the pieces left by the previous one (matches isolated).
#pragma once
#include <string>
#include <vector>

namespace rapid::tok {

// Throws Error for a name llama.cpp would not know either.
std::vector<std::string> gguf_pre_regexes(const std::string& pre);
// Whether llama.cpp sets ignore_merges / add_bos by default for this pre-tokenizer.
bool gguf_pre_ignore_merges(const std::string& pre);
bool gguf_pre_add_bos(const std::string& pre);

}  // namespace rapid::tok
