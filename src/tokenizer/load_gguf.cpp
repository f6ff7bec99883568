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

// The GGUF's token list and the lookups every tokenizer kind needs.
struct GgufTokens {
  const GgufMetadata& md;
  const std::vector<std::string_view>& tokens;
  const std::vector<double>* types;
  size_t n() const { return tokens.size(); }
  int type_of(size_t i) const { return types ? static_cast<int>((*types)[i]) : kNormal; }
  std::string text(size_t i) const { return std::string(tokens[i]); }
  std::optional<int32_t> id_key(const char* k) const {
    auto v = md.get_int(k);
    if (!v || *v < 0 || static_cast<size_t>(*v) >= n()) return std::nullopt;
    return static_cast<int32_t>(*v);
  }
};

// What a kind decides besides the model: whether BOS is added unless the file says otherwise, and
// (WordPiece) the ids around every encoding.
struct KindDefaults {
  bool add_bos = false;
  std::vector<int32_t> prefix, suffix;
};

KindDefaults build_gpt2(PipelineTokenizer& t, const GgufTokens& g, Vocab vocab, const std::string& pre) {
  PieceMerges merges = read_merges(g.md, vocab, g.n());
  BpeOptions opt;
  opt.ignore_merges = gguf_pre_ignore_merges(pre);
  json seq = json::array();
  for (auto& re : gguf_pre_regexes(pre))
    seq.push_back({{"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", "Isolated"},
                   {"invert", false}, {"dollar_endonly", true}});
  seq.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}});
  t.pre_tokenizer = make_pre_tokenizer({{"type", "Sequence"}, {"pretokenizers", seq}});
  t.decoder = make_decoder({{"type", "ByteLevel"}});
  t.model = std::make_unique<BpeModel>(std::move(vocab), std::move(merges), opt);
  return {gguf_pre_add_bos(pre), {}, {}};
}

// SentencePiece BPE merges the adjacent pair whose union has the highest score (leftmost on ties):
// equal scores share a rank so the position breaks the tie. No table of merges: BpeModel derives
// the pair (a, b) -> piece(a) + piece(b) from the vocab (as llama.cpp's SentencePiece tokenizer
// does), with each normal token's rank here. A table of every split of every token held 16 MB (and
// 25 MB while growing) for gemma-3.
PieceMerges score_ranks(const GgufTokens& g, const Vocab& vocab) {
  const auto* scores = g.md.get_numbers("tokenizer.ggml.scores");
  if (!scores || scores->size() != g.n()) throw Error("tokenizer.ggml.scores missing or wrong size");
  std::vector<double> distinct(scores->begin(), scores->end());
  std::sort(distinct.begin(), distinct.end(), std::greater<double>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  PieceMerges merges;
  std::vector<int32_t>& rank = merges.rank;
  rank.assign(g.n(), -1);
  for (size_t i = 0; i < g.n(); ++i) {
    if (g.type_of(i) != kNormal || g.tokens[i].empty()) continue;
    rank[i] = static_cast<int32_t>(
        std::lower_bound(distinct.begin(), distinct.end(), (*scores)[i], std::greater<double>()) - distinct.begin());
  }
  // A piece listed twice: lookups find its first id; if only a later one can be a merge
  // result, merges go to the first such (the table kept the first insertion).
  for (size_t i = 0; i < g.n(); ++i) {
    if (rank[i] < 0) continue;
    int32_t first = vocab.find(g.tokens[i]);
    if (first >= 0 && first != static_cast<int32_t>(i) && rank[first] < 0)
      merges.alias.emplace(first, static_cast<int32_t>(i));
  }
  return merges;
}

KindDefaults build_llama(PipelineTokenizer& t, const GgufTokens& g, Vocab vocab) {
  PieceMerges merges = score_ranks(g, vocab);
  BpeOptions opt;
  opt.byte_fallback = true;
  if (auto u = g.id_key("tokenizer.ggml.unknown_token_id")) opt.unk_token = g.text(*u);
  bool space_prefix = g.md.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  json norms = json::array();
  if (space_prefix) norms.push_back({{"type", "Prepend"}, {"prepend", "\u2581"}});
  norms.push_back(replace_json(" ", "\u2581"));
  t.normalizer = make_normalizer({{"type", "Sequence"}, {"normalizers", norms}});
  json decs = json::array({replace_json("\u2581", " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
  if (space_prefix) decs.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  t.decoder = make_decoder({{"type", "Sequence"}, {"decoders", decs}});
  t.model = std::make_unique<BpeModel>(std::move(vocab), std::move(merges), opt);
  return {true, {}, {}};
}

// SentencePiece-style BPE over raw UTF-8 (no byte-level alphabet): spaces become U+2581, merges
// run on whole lines (newline runs are their own words), bytes fall back to <0xXX>.
KindDefaults build_gemma4(PipelineTokenizer& t, const GgufTokens& g, Vocab vocab) {
  PieceMerges merges = read_merges(g.md, vocab, g.n());
  BpeOptions opt;
  opt.byte_fallback = true;
  t.normalizer = make_normalizer(replace_json(" ", "\u2581"));
  t.pre_tokenizer = make_pre_tokenizer({{"type", "Split"}, {"pattern", {{"Regex", "[^\\n]+|\\n+"}}},
                                        {"behavior", "Isolated"}, {"invert", false}});
  t.decoder = make_decoder({{"type", "Sequence"},
                            {"decoders", json::array({replace_json("\u2581", " "), {{"type", "ByteFallback"}},
                                                      {{"type", "Fuse"}}})}});
  t.model = std::make_unique<BpeModel>(std::move(vocab), std::move(merges), opt);
  return {true, {}, {}};
}

KindDefaults build_bert(PipelineTokenizer& t, const GgufTokens& g, Vocab vocab) {
  WordPieceOptions opt;
  opt.word_prefix = "\u2581";
  opt.continuing_prefix = "";
  auto u = g.id_key("tokenizer.ggml.unknown_token_id");
  opt.unk_token = u ? g.text(*u) : "[UNK]";
  t.normalizer = make_normalizer({{"type", "BertNormalizer"}, {"lowercase", true}});
  t.pre_tokenizer = make_pre_tokenizer({{"type", "BertPreTokenizer"}});
  t.decoder = make_decoder({{"type", "Sequence"},
                            {"decoders", json::array({replace_json("\u2581", " "), {{"type", "Fuse"}},
                                                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}});
  t.model = std::make_unique<WordPieceModel>(std::move(vocab), opt);
  KindDefaults d;
  if (auto c = g.id_key("tokenizer.ggml.cls_token_id")) d.prefix.push_back(*c);
  if (auto s = g.id_key("tokenizer.ggml.seperator_token_id")) d.suffix.push_back(*s);
  return d;
}

// BOS/EOS ids and texts, and the ids added around every encoding.
void set_special_ids(PipelineTokenizer& t, const GgufTokens& g, const std::string& model, KindDefaults d) {
  t.bos = g.id_key("tokenizer.ggml.bos_token_id");
  if (t.bos) t.bos_text = g.text(*t.bos);
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (auto e = g.id_key(k); e && std::find(t.eos.begin(), t.eos.end(), *e) == t.eos.end()) t.eos.push_back(*e);
  if (!t.eos.empty()) t.eos_text = g.text(t.eos[0]);
  bool add_bos = g.md.get_bool("tokenizer.ggml.add_bos_token").value_or(d.add_bos);
  if (model == "gemma4") add_bos = true;  // Gemma 4 needs <bos> even where converters wrote false
  bool add_eos = g.md.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  if (model != "bert") {
    if (add_bos && t.bos) d.prefix.push_back(*t.bos);
    if (add_eos && !t.eos.empty()) d.suffix.push_back(t.eos[0]);
  }
  t.prefix_ids = d.prefix;
  t.suffix_ids = d.suffix;
}

// Control, user-defined and unknown tokens are matched whole in the text, as llama.cpp does.
void add_listed_tokens(PipelineTokenizer& t, const GgufTokens& g) {
  std::vector<AddedToken> added;
  for (size_t i = 0; i < g.n(); ++i) {
    int ty = g.type_of(i);
    if (ty != kControl && ty != kUserDefined && ty != kUnknown) continue;
    AddedToken a;
    a.id = static_cast<int32_t>(i);
    a.content = g.text(i);
    a.special = ty != kUserDefined;
    added.push_back(a);
  }
  t.add_tokens(added);
}

KindDefaults build_kind(PipelineTokenizer& t, const GgufTokens& g, const std::string& model) {
  size_t chars = 0;
  for (auto tok : g.tokens) chars += tok.size();
  Vocab vocab;
  vocab.reserve(g.n(), chars);
  t.pieces.resize(g.n());
  t.pieces.reserve_chars(chars);
  for (size_t i = 0; i < g.n(); ++i) {
    t.pieces.set(i, g.tokens[i]);
    vocab.emplace(g.tokens[i], static_cast<int32_t>(i));
  }
  if (model == "gpt2") return build_gpt2(t, g, std::move(vocab), g.md.get_string("tokenizer.ggml.pre").value_or("default"));
  if (model == "llama") return build_llama(t, g, std::move(vocab));
  if (model == "gemma4") return build_gemma4(t, g, std::move(vocab));
  if (model == "bert") return build_bert(t, g, std::move(vocab));
  throw Error("unsupported tokenizer.ggml.model '" + model + "'");
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
    const auto* types = md.get_numbers("tokenizer.ggml.token_type");
    if (types && types->size() != tokens->size()) throw Error("token_type count differs from token count");
    const GgufTokens g{md, *tokens, types};
    set_special_ids(*t, g, *model, build_kind(*t, g, *model));
    t->chat_tmpl = md.get_string("tokenizer.chat_template").value_or("");
    add_listed_tokens(*t, g);
  } catch (const FileError&) {
    throw;
  } catch (const std::exception& e) {
    throw FileError(path, std::string("invalid GGUF tokenizer: ") + e.what());
  }
  return t;
}

}  // namespace rapid::tok
