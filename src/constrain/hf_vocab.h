// Token bytes straight from a Hugging Face tokenizer.json (+ tokenizer_config.json for EOS),
// without a full Tokenizer: what tests and benchmarks of constrained decoding need. Handles
// byte-level BPE (GPT-2 byte↔unicode mapping) and SentencePiece-style vocabularies ("▁" = space,
// "<0xNN>" byte-fallback pieces).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rapid::constrain {

struct HfVocab {
  std::vector<std::string> bytes;  // per id; "" for ids without a piece
  std::vector<bool> special;
  std::vector<int32_t> eos;
};

// DIR holds tokenizer.json and optionally tokenizer_config.json. Throws FileError.
HfVocab load_hf_vocab(const std::string& dir);

}  // namespace rapid::constrain
