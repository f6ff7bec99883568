// Reads token bytes from tokenizer.json.
#include "constrain/hf_vocab.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "constrain/grammar.h"

namespace rapid::constrain {

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw FileError(path, "cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path, std::string("not valid JSON: ") + e.what());
  }
}

bool mentions_byte_level(const nlohmann::json& j) {
  if (j.is_object()) {
    if (j.contains("type") && j["type"] == "ByteLevel") return true;
    for (const auto& [k, v] : j.items())
      if (mentions_byte_level(v)) return true;
  } else if (j.is_array()) {
    for (const auto& v : j)
      if (mentions_byte_level(v)) return true;
  }
  return false;
}

// GPT-2's table: printable bytes stand for themselves, the rest are shifted to U+0100 onwards.
std::map<uint32_t, uint8_t> unicode_to_byte() {
  std::map<uint32_t, uint8_t> m;
  uint32_t n = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    m[printable ? b : 256 + n++] = uint8_t(b);
  }
  return m;
}

}  // namespace

HfVocab load_hf_vocab(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  nlohmann::json tj = read_json(path);
  if (!tj.contains("model") || !tj["model"].contains("vocab"))
    throw FileError(path, "no model.vocab");
  const bool byte_level = mentions_byte_level(tj["decoder"]) || mentions_byte_level(tj["pre_tokenizer"]);
  const auto u2b = unicode_to_byte();

  std::map<int64_t, std::string> pieces;
  const auto& vocab = tj["model"]["vocab"];
  if (vocab.is_object()) {
    for (const auto& [piece, id] : vocab.items()) pieces[id.get<int64_t>()] = piece;
  } else if (vocab.is_array()) {  // Unigram: [[piece, score], ...]
    for (size_t i = 0; i < vocab.size(); ++i) pieces[int64_t(i)] = vocab[i][0].get<std::string>();
  }
  std::map<int64_t, std::pair<std::string, bool>> added;
  std::map<std::string, int64_t> ids;
  for (const auto& [id, p] : pieces) ids[p] = id;
  if (tj.contains("added_tokens"))
    for (const auto& a : tj["added_tokens"]) {
      added[a["id"].get<int64_t>()] = {a["content"].get<std::string>(), a.value("special", false)};
      ids[a["content"].get<std::string>()] = a["id"].get<int64_t>();
    }
  int64_t n = 0;
  if (!pieces.empty()) n = pieces.rbegin()->first + 1;
  if (!added.empty()) n = std::max(n, added.rbegin()->first + 1);

  HfVocab v;
  v.bytes.resize(size_t(n));
  v.special.resize(size_t(n), false);
  for (const auto& [id, piece] : pieces) {
    std::string out;
    if (byte_level) {
      size_t i = 0;
      bool ok = true;
      while (i < piece.size()) {
        unsigned char c = static_cast<unsigned char>(piece[i]);
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
        for (int k = 1; k < len && i + size_t(k) < piece.size(); ++k)
          cp = (cp << 6) | (static_cast<unsigned char>(piece[i + size_t(k)]) & 0x3F);
        auto it = u2b.find(cp);
        if (it == u2b.end()) {
          ok = false;
          break;
        }
        out += char(it->second);
        i += size_t(len);
      }
      if (!ok) out = piece;
    } else if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>') {
      out = char(std::stoi(piece.substr(3, 2), nullptr, 16));
    } else {
      for (size_t i = 0; i < piece.size();) {
        if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
          out += ' ';
          i += 3;
        } else {
          out += piece[i++];
        }
      }
    }
    v.bytes[size_t(id)] = out;
  }
  for (const auto& [id, a] : added) {
    v.special[size_t(id)] = a.second;
    if (a.second) continue;
    std::string out;  // added tokens are literal text (SentencePiece ones may spell spaces "▁")
    for (size_t i = 0; i < a.first.size();) {
      if (!byte_level && a.first.compare(i, 3, "\xE2\x96\x81") == 0) {
        out += ' ';
        i += 3;
      } else {
        out += a.first[i++];
      }
    }
    v.bytes[size_t(id)] = out;
  }
  // SentencePiece control pieces such as <s>, </s>, <unk> that are not in added_tokens.
  if (!byte_level)
    for (const char* ctl : {"<s>", "</s>", "<unk>", "<pad>"}) {
      auto it = ids.find(ctl);
      if (it != ids.end()) v.special[size_t(it->second)] = true;
    }

  std::ifstream cf(dir + "/tokenizer_config.json");
  if (cf) {
    nlohmann::json cj = read_json(dir + "/tokenizer_config.json");
    if (cj.contains("eos_token")) {
      const auto& e = cj["eos_token"];
      std::string s = e.is_string() ? e.get<std::string>() : e.is_object() ? e.value("content", "") : "";
      auto it = ids.find(s);
      if (it != ids.end()) v.eos.push_back(int32_t(it->second));
    }
  }
  return v;
}

}  // namespace rapid::constrain
