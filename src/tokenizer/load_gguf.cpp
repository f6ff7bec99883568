// Builds a tokenizer from GGUF tokenizer.ggml.* metadata, reproducing llama.cpp's tokenizers:
// gpt2 -> byte-level BPE with the pre-tokenizer's regexes; llama -> SentencePiece BPE by score
// with byte fallback; bert -> WordPiece with "▁"-marked word starts.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "common/error.h"
#include "tokenizer/factories.h"
#include "tokenizer/gguf_pre_regex.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/loaders.h"
#include "tokenizer/models.h"
#include "tokenizer/unicode.h"

namespace rapid::tok {
namespace {
using nlohmann::json;
enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

json replace_json(const std::string& from, const std::string& to) {
  return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}
// tokenizer.ggml.merges ("a b" lines) keyed by their result (PieceMerges): a merge of "a b"
// yields the token "ab".
PieceMerges read_merges(const GgufMetadata& md, const Vocab& vocab, size_t n) {
  PieceMerges merges;
  const auto* jm = md.get_strings("tokenizer.ggml.merges");
  if (!jm) throw Error("no tokenizer.ggml.merges for a BPE tokenizer");
  merges.rank.assign(n, -1);
  merges.split.assign(n, 0);
  int32_t rank = 0;
  std::string joined;
  for (std::string_view m : *jm) {
    size_t sp = m.find(' ', 1);
    if (sp == std::string_view::npos) continue;
    joined.assign(m.substr(0, sp)).append(m.substr(sp + 1));
    int32_t a = vocab.find(m.substr(0, sp)), b = vocab.find(m.substr(sp + 1)), c = vocab.find(joined);
    if (a < 0 || b < 0 || c < 0) continue;
    if (merges.rank[c] < 0 && sp <= UINT16_MAX) {
      merges.rank[c] = rank;
      merges.split[c] = static_cast<uint16_t>(sp);
    } else if (merges.rank[c] < 0 || merges.split[c] != sp) {
      if (merges.extra.size() == 0) merges.extra.reserve(16);
      merges.extra.insert(a, b, rank, c);  // keeps the first (lowest rank) of a repeated pair
    }
    ++rank;
  }
  return merges;
}
}  // namespace

std::unique_ptr<PipelineTokenizer> load_tokenizer_gguf(const std::string& path) {
  GgufMetadata md = GgufMetadata::read(path);
  auto t = std::make_unique<PipelineTokenizer>();
  try {
    auto model = md.get_string("tokenizer.ggml.model");
    if (!model) throw Error("no tokenizer.ggml.model key");
    const auto* tokens = md.get_strings("tokenizer.ggml.tokens");
    if (!tokens || tokens->empty()) throw Error("no tokenizer.ggml.tokens");
    size_t n = tokens->size();
    const auto* types = md.get_numbers("tokenizer.ggml.token_type");
    if (types && types->size() != n) throw Error("token_type count differs from token count");
    auto type_of = [&](size_t i) { return types ? static_cast<int>((*types)[i]) : kNormal; };
    std::string pre = md.get_string("tokenizer.ggml.pre").value_or("default");

    size_t chars = 0;
    for (auto tok : *tokens) chars += tok.size();
    Vocab vocab;
    vocab.reserve(n, chars);
    t->pieces.resize(n);
    t->pieces.reserve_chars(chars);
    for (size_t i = 0; i < n; ++i) {
      t->pieces.set(i, (*tokens)[i]);
      vocab.emplace((*tokens)[i], static_cast<int32_t>(i));
    }
    auto id_key = [&](const char* k) -> std::optional<int32_t> {
      auto v = md.get_int(k);
      if (!v || *v < 0 || static_cast<size_t>(*v) >= n) return std::nullopt;
      return static_cast<int32_t>(*v);
    };

    bool add_bos = false, add_eos = false;
    std::vector<int32_t> prefix, suffix;
    if (*model == "gpt2") {
      PieceMerges merges = read_merges(md, vocab, n);
      BpeOptions opt;
      opt.ignore_merges = gguf_pre_ignore_merges(pre);
      json seq = json::array();
      for (auto& re : gguf_pre_regexes(pre))
        seq.push_back({{"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", "Isolated"},
                       {"invert", false}, {"dollar_endonly", true}});
      seq.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
      t->pre_tokenizer = make_pre_tokenizer({{"type", "Sequence"}, {"pretokenizers", seq}});
      t->decoder = make_decoder({{"type", "ByteLevel"}});
      t->model = std::make_unique<BpeModel>(std::move(vocab), std::move(merges), opt);
      add_bos = gguf_pre_add_bos(pre);
    } else if (*model == "llama") {
      const auto* scores = md.get_numbers("tokenizer.ggml.scores");
      if (!scores || scores->size() != n) throw Error("tokenizer.ggml.scores missing or wrong size");
      // SentencePiece BPE merges the adjacent pair whose union has the highest score (leftmost
      // on ties): equal scores share a rank so the position breaks the tie.
      std::vector<double> distinct(scores->begin(), scores->end());
      std::sort(distinct.begin(), distinct.end(), std::greater<double>());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
      // No table of merges: BpeModel derives the pair (a, b) -> piece(a) + piece(b) from the
      // vocab (as llama.cpp's SentencePiece tokenizer does), with each normal token's rank here.
      // A table of every split of every token held 16 MB (and 25 MB while growing) for gemma-3.
      PieceMerges merges;
      std::vector<int32_t>& merge_rank = merges.rank;
      merge_rank.assign(n, -1);
      for (size_t i = 0; i < n; ++i) {
        if (type_of(i) != kNormal || (*tokens)[i].empty()) continue;
        merge_rank[i] = static_cast<int32_t>(
            std::lower_bound(distinct.begin(), distinct.end(), (*scores)[i], std::greater<double>()) -
            distinct.begin());
      }
      // A piece listed twice: lookups find its first id; if only a later one can be a merge
      // result, merges go to the first such (the table kept the first insertion).
      std::unordered_map<int32_t, int32_t>& alias = merges.alias;
      for (size_t i = 0; i < n; ++i) {
        if (merge_rank[i] < 0) continue;
        int32_t first = vocab.find((*tokens)[i]);
        if (first >= 0 && first != static_cast<int32_t>(i) && merge_rank[first] < 0) alias.emplace(first, static_cast<int32_t>(i));
      }
      BpeOptions opt;
      opt.byte_fallback = true;
      if (auto u = id_key("tokenizer.ggml.unknown_token_id")) opt.unk_token = std::string((*tokens)[*u]);
      bool space_prefix = md.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
      json norms = json::array();
      if (space_prefix) norms.push_back({{"type", "Prepend"}, {"prepend", "\u2581"}});
      norms.push_back(replace_json(" ", "\u2581"));
      t->normalizer = make_normalizer({{"type", "Sequence"}, {"normalizers", norms}});
      json decs = json::array({replace_json("\u2581", " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
      if (space_prefix) decs.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
      t->decoder = make_decoder({{"type", "Sequence"}, {"decoders", decs}});
      t->model = std::make_unique<BpeModel>(std::move(vocab), std::move(merges), opt);
      add_bos = true;
    } else if (*model == "gemma4") {
      // SentencePiece-style BPE over raw UTF-8 (no byte-level alphabet): spaces become U+2581,
      // merges run on whole lines (newline runs are their own words), bytes fall back to <0xXX>.
      PieceMerges merges = read_merges(md, vocab, n);
      BpeOptions opt;
      opt.byte_fallback = true;
      t->normalizer = make_normalizer(replace_json(" ", "\u2581"));
      t->pre_tokenizer = make_pre_tokenizer({{"type", "Split"}, {"pattern", {{"Regex", "[^\\n]+|\\n+"}}},
                                             {"behavior", "Isolated"}, {"invert", false}});
      t->decoder = make_decoder({{"type", "Sequence"},
                                 {"decoders", json::array({replace_json("\u2581", " "), {{"type", "ByteFallback"}},
                                                           {{"type", "Fuse"}}})}});
      t->model = std::make_unique<BpeModel>(std::move(vocab), std::move(merges), opt);
      add_bos = true;
    } else if (*model == "bert") {
      WordPieceOptions opt;
      opt.word_prefix = "\u2581";
      opt.continuing_prefix = "";
      auto u = id_key("tokenizer.ggml.unknown_token_id");
      opt.unk_token = u ? std::string((*tokens)[*u]) : "[UNK]";
      t->normalizer = make_normalizer({{"type", "BertNormalizer"}, {"lowercase", true}});
      t->pre_tokenizer = make_pre_tokenizer({{"type", "BertPreTokenizer"}});
      t->decoder = make_decoder({{"type", "Sequence"},
                                 {"decoders", json::array({replace_json("\u2581", " "), {{"type", "Fuse"}},
                                                           {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}});
      t->model = std::make_unique<WordPieceModel>(std::move(vocab), opt);
      if (auto c = id_key("tokenizer.ggml.cls_token_id")) prefix.push_back(*c);
      if (auto s = id_key("tokenizer.ggml.seperator_token_id")) suffix.push_back(*s);
    } else {
      throw Error("unsupported tokenizer.ggml.model '" + *model + "'");
    }

    t->bos = id_key("tokenizer.ggml.bos_token_id");
    if (t->bos) t->bos_text = std::string((*tokens)[*t->bos]);
    for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
      if (auto e = id_key(k); e && std::find(t->eos.begin(), t->eos.end(), *e) == t->eos.end()) t->eos.push_back(*e);
    if (!t->eos.empty()) t->eos_text = std::string((*tokens)[t->eos[0]]);
    add_bos = md.get_bool("tokenizer.ggml.add_bos_token").value_or(add_bos);
    if (*model == "gemma4") add_bos = true;  // Gemma 4 needs <bos> even where converters wrote false
    add_eos = md.get_bool("tokenizer.ggml.add_eos_token").value_or(add_eos);
    if (*model != "bert") {
      if (add_bos && t->bos) prefix.push_back(*t->bos);
      if (add_eos && !t->eos.empty()) suffix.push_back(t->eos[0]);
    }
    t->prefix_ids = prefix;
    t->suffix_ids = suffix;
    t->chat_tmpl = md.get_string("tokenizer.chat_template").value_or("");

    std::vector<AddedToken> added;
    for (size_t i = 0; i < n; ++i) {
      int ty = type_of(i);
      if (ty != kControl && ty != kUserDefined && ty != kUnknown) continue;
      AddedToken a;
      a.id = static_cast<int32_t>(i);
      a.content = std::string((*tokens)[i]);
      a.special = ty != kUserDefined;
      added.push_back(a);
    }
    t->add_tokens(added);
  } catch (const FileError&) {
    throw;
  } catch (const std::exception& e) {
    throw FileError(path, std::string("invalid GGUF tokenizer: ") + e.what());
  }
  return t;
}

}  // namespace rapid::tok
