// Internal loaders behind rapid::load_tokenizer.
#pragma once
#include <memory>
#include <string>

#include "tokenizer/pipeline_tokenizer.h"

namespace rapid::tok {

// tokenizer.json; config_path may be "" or a missing file.
std::unique_ptr<PipelineTokenizer> load_tokenizer_json(const std::string& path,
                                                       const std::string& config_path);
std::unique_ptr<PipelineTokenizer> load_tokenizer_gguf(const std::string& path);

}  // namespace rapid::tok
