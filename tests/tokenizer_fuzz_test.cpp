// Robustness: mutated tokenizer.json and GGUF files must load or fail with an Error — never
// crash, hang or read out of bounds (CI runs this under ASan + UBSan). Bounded to a few seconds.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/mapped_file.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace {
using nlohmann::json;
namespace fs = std::filesystem;

// A small tokenizer.json exercising most component types.
json base_tokenizer() {
  json vocab = json::object();
  std::vector<std::string> toks = {"<unk>", "<s>", "</s>", "a", "b", "c", "ab", "abc", "\u2581", "\u2581a",
                                   "<0x41>", "<0xE2>", "1", "2", "12", " ", "Ġ", "Ġa"};
  for (size_t i = 0; i < toks.size(); ++i) vocab[toks[i]] = i;
  return json{
      {"version", "1.0"},
      {"added_tokens", json::array({{{"id", 1}, {"content", "<s>"}, {"special", true}, {"lstrip", true},
                                     {"rstrip", false}, {"single_word", false}, {"normalized", false}},
                                    {{"id", 2}, {"content", "</s>"}, {"special", true}, {"rstrip", true},
                                     {"single_word", true}, {"normalized", true}}})},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}},
                                                                          {{"type", "Prepend"}, {"prepend", "\u2581"}},
                                                                          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}})}}},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", json::array({
          {{"type", "Split"}, {"pattern", {{"Regex", "\\p{N}{1,3}|[^\\s\\p{N}]+|\\s+"}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "Digits"}, {"individual_digits", false}},
          {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", true}}})}}},
      {"post_processor", {{"type", "TemplateProcessing"},
                          {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                          {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", json::array({1})}, {"tokens", json::array({"<s>"})}}}}}}},
      {"decoder", {{"type", "Sequence"}, {"decoders", json::array({
          {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
          {{"type", "ByteFallback"}}, {{"type", "Fuse"}}, {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model", {{"type", "BPE"}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", true},
                 {"vocab", vocab}, {"merges", json::array({"a b", "ab c", "\u2581 a", "1 2", "Ġ a"})}}}};
}

json random_value(std::mt19937& rng) {
  switch (rng() % 8) {
    case 0: return nullptr;
    case 1: return static_cast<int64_t>(rng()) - (1ll << 31);
    case 2: return -1;
    case 3: return "(?<";
    case 4: return json::array({"x", 1, nullptr});
    case 5: return json::object({{"type", "Nope"}});
    case 6: return true;
    default: return 1e300;
  }
}

// Replaces one random node of j (walking down randomly) with a random value.
void mutate_tree(json& j, std::mt19937& rng, int depth = 0) {
  if ((j.is_object() || j.is_array()) && !j.empty() && (depth < 2 || rng() % 3)) {
    auto it = j.begin();
    std::advance(it, rng() % j.size());
    mutate_tree(*it, rng, depth + 1);
    return;
  }
  j = random_value(rng);
}

void exercise(const rapid::tok::Tokenizer& tok, std::mt19937& rng) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += static_cast<char>(rng() % 3 ? "ab c12<s></s>\xE2\x96\x81 "[rng() % 16] : rng());
  auto ids = tok.encode(text, true, rng() % 2);
  ids.push_back(static_cast<int32_t>(rng() % 100) - 50);
  ids.push_back(1 << 30);
  (void)tok.decode(ids, rng() % 2);
  rapid::tok::StreamingDetokenizer sd(tok, true);
  for (int32_t id : ids) (void)sd.push(id);
  (void)sd.flush();
  for (int32_t id : ids) { (void)tok.token_bytes(id); (void)tok.id_to_piece(id); (void)tok.is_special(id); }
}

fs::path temp_file(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("rapid_tok_fuzz_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

void write(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

TEST(TokenizerFuzz, BaseTokenizerLoads) {
  auto p = temp_file("tokenizer.json");
  write(p, base_tokenizer().dump());
  auto tok = rapid::tok::load_tokenizer(p.string());
  std::mt19937 rng(3);
  exercise(*tok, rng);
  EXPECT_EQ(tok->encode("ab", true).front(), 1);
}

TEST(TokenizerFuzz, MutatedTokenizerJson) {
  std::mt19937 rng(12345);
  auto p = temp_file("tokenizer.json");
  std::string base = base_tokenizer().dump();
  int loaded = 0, refused = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::string s;
    if (iter % 2) {
      json j = base_tokenizer();
      for (int k = 0, n = 1 + rng() % 3; k < n; ++k) mutate_tree(j, rng);
      s = j.dump();
    } else {
      s = base;
      for (int k = 0, n = 1 + rng() % 8; k < n; ++k) {
        size_t pos = rng() % s.size();
        switch (rng() % 3) {
          case 0: s[pos] = static_cast<char>(rng()); break;
          case 1: s.erase(pos, 1 + rng() % 4); break;
          default: s.resize(pos); break;
        }
        if (s.empty()) break;
      }
    }
    write(p, s);
    try {
      auto tok = rapid::tok::load_tokenizer(p.string());
      exercise(*tok, rng);
      ++loaded;
    } catch (const rapid::Error&) {
      ++refused;
    }
  }
  std::printf("[ fuzz ] tokenizer.json: %d loaded, %d refused\n", loaded, refused);
  EXPECT_GT(refused, 0);
  EXPECT_GT(loaded, 0);
}

// A minimal GGUF v3 writer for a tiny gpt2-style vocabulary.
struct GgufWriter {
  std::string out;
  void u32(uint32_t v) { out.append(reinterpret_cast<char*>(&v), 4); }
  void u64(uint64_t v) { out.append(reinterpret_cast<char*>(&v), 8); }
  void str(const std::string& s) { u64(s.size()); out += s; }
  void kv_str(const std::string& k, const std::string& v) { str(k); u32(8); str(v); }
  void kv_u32(const std::string& k, uint32_t v) { str(k); u32(4); u32(v); }
  void kv_strs(const std::string& k, const std::vector<std::string>& v) {
    str(k); u32(9); u32(8); u64(v.size());
    for (auto& s : v) str(s);
  }
  void kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
    str(k); u32(9); u32(5); u64(v.size());
    for (int32_t x : v) u32(static_cast<uint32_t>(x));
  }
};

std::string tiny_gguf() {
  GgufWriter w;
  w.out = "GGUF";
  w.u32(3);
  w.u64(0);
  w.u64(7);
  std::vector<std::string> toks = {"<|end|>", "a", "b", "ab", "Ġ", "Ġa", "1", "<|user|>"};
  w.kv_str("tokenizer.ggml.model", "gpt2");
  w.kv_str("tokenizer.ggml.pre", "qwen2");
  w.kv_strs("tokenizer.ggml.tokens", toks);
  w.kv_i32s("tokenizer.ggml.token_type", {3, 1, 1, 1, 1, 1, 1, 4});
  w.kv_strs("tokenizer.ggml.merges", {"a b", "Ġ a"});
  w.kv_u32("tokenizer.ggml.eos_token_id", 0);
  w.kv_str("tokenizer.chat_template", "{{ messages }}");
  return w.out;
}

TEST(TokenizerFuzz, TinyGgufLoads) {
  auto p = temp_file("tiny.gguf");
  write(p, tiny_gguf());
  auto tok = rapid::tok::load_tokenizer(p.string());
  EXPECT_EQ(tok->encode("ab a<|user|>", false, false), (std::vector<int32_t>{3, 5, 7}));
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{0});
  EXPECT_EQ(tok->chat_template(), "{{ messages }}");
}

TEST(TokenizerFuzz, MutatedGguf) {
  std::mt19937 rng(777);
  std::string base = tiny_gguf();
  std::string real = rapid::read_file(std::string(RAPID_FIXTURES_DIR) + "/vocab-gguf/ggml-vocab-bert-bge.gguf");
  auto p = temp_file("m.gguf");
  int parsed = 0, refused = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    bool use_real = iter % 10 == 0;
    std::string s = use_real ? real.substr(0, 4096 + rng() % 4096) : base;
    for (int k = 0, n = 1 + rng() % 6; k < n; ++k) {
      size_t pos = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[pos] = static_cast<char>(rng()); break;
        case 1: {  // a plausible-but-wrong length/count field
          uint64_t v = rng() % 2 ? ~0ull >> (rng() % 40) : rng() % 64;
          if (pos + 8 <= s.size()) std::memcpy(&s[pos], &v, 8);
          break;
        }
        case 2: s.resize(pos); break;
        default: s.insert(pos, 1, static_cast<char>(rng())); break;
      }
      if (s.empty()) break;
    }
    try {
      rapid::tok::GgufMetadata::parse(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "m.gguf");
      ++parsed;
    } catch (const rapid::Error&) {
      ++refused;
    }
    if (!use_real && iter % 3 == 0) {
      write(p, s);
      try {
        auto tok = rapid::tok::load_tokenizer(p.string());
        exercise(*tok, rng);
      } catch (const rapid::Error&) {
      }
    }
  }
  std::printf("[ fuzz ] gguf: %d parsed, %d refused\n", parsed, refused);
  EXPECT_GT(refused, 0);
}

TEST(TokenizerFuzz, RandomBytesThroughRealTokenizers) {
  std::mt19937 rng(99);
  for (std::string name : {"gpt2", "llama2"}) {
    auto tok = rapid::tok::load_tokenizer(std::string(RAPID_FIXTURES_DIR) + "/tokenizers/" + name);
    for (int i = 0; i < 300; ++i) {
      std::string s(rng() % 200, '\0');
      for (auto& c : s) c = static_cast<char>(rng());
      auto ids = tok->encode(s, true, true);
      EXPECT_FALSE(s.size() && ids.empty());
      (void)tok->decode(ids);
    }
  }
}

}  // namespace
