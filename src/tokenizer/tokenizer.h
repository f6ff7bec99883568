// Tokenizer contract used by the engine, the server and constrained decoding. Implementations
// (byte-level BPE, SentencePiece BPE, WordPiece) live beside this header.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rapid::tok {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // add_special: BOS/EOS per add_bos_token/add_eos_token and the post-processor.
  // parse_special: special/added-token text in `text` becomes its id (else it is plain text;
  // non-special added tokens are always matched, as in HF tokenizers).
  // Invalid UTF-8 in `text` is first repaired like Python's bytes.decode(errors='replace')
  // (each maximal invalid subsequence -> U+FFFD), since HF tokenizers only accepts str.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                                      bool parse_special = true) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const = 0;

  virtual int64_t vocab_size() const = 0;
  // The raw bytes token `id` stands for when decoded in isolation after other text (byte-level
  // tokens map back to their bytes, metaspace "▁" to a space); used by constrained decoding.
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual std::string id_to_piece(int32_t id) const = 0;  // the vocab string as stored
  virtual bool is_special(int32_t id) const = 0;

  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::vector<int32_t> eos_ids() const = 0;
  virtual std::string bos_token() const = 0;  // text form, for chat templates ("" if none)
  virtual std::string eos_token() const = 0;
  // Jinja chat template from tokenizer_config.json / chat_template.jinja / GGUF; "" if none.
  virtual std::string chat_template() const = 0;
};

// PATH: a model directory (tokenizer.json + tokenizer_config.json), a tokenizer.json, or a .gguf.
// Throws FileError with the path and reason.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// Turns tokens into text one at a time. Never emits a broken UTF-8 sequence; the concatenation
// of everything emitted (including flush()) equals tokenizer.decode(all ids, skip_special).
class StreamingDetokenizer {
 public:
  StreamingDetokenizer(const Tokenizer& tok, bool skip_special = true,
                       std::vector<int32_t> context = {});
  std::string push(int32_t id);  // newly completed text, possibly empty
  std::string flush();           // whatever is still held (e.g. an incomplete byte sequence)

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;
  size_t read_offset_ = 0;
  std::string emitted_;
};

}  // namespace rapid::tok
