// UTF-8 and Unicode helpers for the tokenizer: decoding, lossy repair, normalization forms,
// general categories and lowercase, backed by tables generated from Python's unicodedata.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include "common/utf8.h"

namespace rapid::tok::uni {

enum Cat : uint8_t {
  Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps,
  Pe, Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co
};

Cat category(uint32_t cp);
inline bool is_letter(uint32_t cp) { Cat c = category(cp); return c >= Lu && c <= Lo; }
inline bool is_mark(uint32_t cp) { Cat c = category(cp); return c >= Mn && c <= Me; }
inline bool is_number(uint32_t cp) { Cat c = category(cp); return c >= Nd && c <= No; }
inline bool is_punct(uint32_t cp) { Cat c = category(cp); return c >= Pc && c <= Po; }
inline bool is_symbol(uint32_t cp) { Cat c = category(cp); return c >= Sm && c <= So; }
// Rust char::is_whitespace (Unicode White_Space property).
bool is_whitespace(uint32_t cp);
// Marks that tokenizers' StripAccents removes.
bool is_strippable_accent(uint32_t cp);
// Marks that tokenizers' BertNormalizer (strip_accents) removes.
bool is_bert_strippable_accent(uint32_t cp);
// BertNormalizer clean_text: deleted / turned into a space.
bool is_bert_dropped(uint32_t cp);
bool is_bert_space(uint32_t cp);
// Punctuation for BertPreTokenizer / Punctuation (ASCII punctuation or tokenizers' P*).
bool is_bert_punct(uint32_t cp);
// Rust char::is_alphanumeric, and regex \w (used by added-token single_word checks).
bool is_word_char(uint32_t cp);

// Decodes one code point at s[i], advancing i. Input must be valid UTF-8 (see to_valid_utf8).
uint32_t next_cp(std::string_view s, size_t& i);
using rapid::append_utf8;
size_t utf8_len(unsigned char lead);  // 1..4 from a lead byte (1 for continuation/invalid)

bool is_valid_utf8(std::string_view s);
// Replaces each maximal invalid subsequence with U+FFFD, exactly like Python's
// bytes.decode('utf-8', errors='replace') and Rust's String::from_utf8_lossy.
std::string to_valid_utf8(std::string_view s);

std::vector<uint32_t> to_cps(std::string_view s);
std::string from_cps(const std::vector<uint32_t>& cps);

enum class NormForm { NFC, NFD, NFKC, NFKD };
std::string normalize(std::string_view s, NormForm form);
std::string lowercase(std::string_view s);
std::vector<uint32_t> decompose(const std::vector<uint32_t>& cps, bool compat);

}  // namespace rapid::tok::uni
