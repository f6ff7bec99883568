// Loads a Hugging Face tokenizer.json (+ tokenizer_config.json / chat_template.jinja beside it).
#include <filesystem>

#include "common/error.h"
#include "common/mapped_file.h"
#include "tokenizer/factories.h"
#include "tokenizer/json_sax.h"
#include "tokenizer/loaders.h"
#include "tokenizer/models.h"

namespace rapid::tok {
namespace {
using nlohmann::json;

std::unique_ptr<Model> make_model(const json& m, ParsedTokenizerJson& pj, PipelineTokenizer& t) {
  std::string type = m.value("type", std::string());
  Vocab vocab;
  if (type.empty()) type = pj.has_merges ? "BPE" : (m.contains("max_input_chars_per_word") ? "WordPiece" : "");
  if (type == "Unigram") throw Error("tokenizer model 'Unigram' (SentencePiece, e.g. XLM-RoBERTa) is not supported");
  if (!pj.has_vocab) throw Error("model.vocab must be an object for " + type);
  int64_t max_id = -1;
  size_t chars = 0;
  for (auto& [piece, id] : pj.vocab) {
    if (id < 0 || id > (1 << 26)) throw Error("token id out of range for '" + piece + "'");
    max_id = std::max(max_id, id);
    chars += piece.size();
  }
  vocab.reserve(pj.vocab.size(), chars);
  t.pieces.resize(max_id + 1);
  for (auto& [piece, id] : pj.vocab) {
    t.pieces.set(id, piece);
    vocab.emplace(piece, static_cast<int32_t>(id));
  }
  // The parsed strings are copied into the compact stores: free them now, not at the end of load.
  std::vector<std::pair<std::string, int64_t>>().swap(pj.vocab);
  auto str_or_empty = [&](const char* k) {
    auto it = m.find(k);
    return (it == m.end() || it->is_null()) ? std::string() : it->get<std::string>();
  };
  if (type == "BPE") {
    BpeOptions opt;
    opt.unk_token = str_or_empty("unk_token");
    opt.fuse_unk = m.value("fuse_unk", false);
    opt.byte_fallback = m.value("byte_fallback", false);
    opt.ignore_merges = m.value("ignore_merges", false);
    opt.continuing_subword_prefix = str_or_empty("continuing_subword_prefix");
    opt.end_of_word_suffix = str_or_empty("end_of_word_suffix");
    if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() > 0)
      throw Error("BPE dropout is not supported");
    MergeTable merges;
    merges.reserve(pj.merges.size());
    int32_t rank = 0;
    size_t plen = opt.continuing_subword_prefix.size();
    for (const auto& [a, b] : pj.merges) {
      int32_t ia = vocab.find(a), ib = vocab.find(b);
      if (ia < 0 || ib < 0) throw Error("merge token not in vocab: " + a + " " + b);
      std::string merged = a + (plen && b.compare(0, plen, opt.continuing_subword_prefix) == 0 ? b.substr(plen) : b);
      int32_t im = vocab.find(merged);
      if (im < 0) throw Error("merged token not in vocab: " + merged);
      merges.insert(ia, ib, rank++, im);
    }
    std::vector<std::pair<std::string, std::string>>().swap(pj.merges);
    return std::make_unique<BpeModel>(std::move(vocab), std::move(merges), opt);
  }
  if (type == "WordPiece") {
    WordPieceOptions opt;
    opt.unk_token = m.value("unk_token", std::string("[UNK]"));
    opt.continuing_prefix = m.value("continuing_subword_prefix", std::string("##"));
    opt.max_input_chars_per_word = m.value("max_input_chars_per_word", size_t{100});
    return std::make_unique<WordPieceModel>(std::move(vocab), opt);
  }
  throw Error("unsupported tokenizer model type '" + type + "'");
}

// Returns the ids that one TemplateProcessing / Bert / Roberta processor puts before and after A.
void add_post_processor(const json& p, PipelineTokenizer& t, const Vocab* vocab) {
  if (p.is_null()) return;
  std::string type = p.at("type").get<std::string>();
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (auto& q : p.at("processors")) add_post_processor(q, t, vocab);
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    int32_t cls = p.at("cls").at(1).get<int32_t>(), sep = p.at("sep").at(1).get<int32_t>();
    t.prefix_ids.insert(t.prefix_ids.begin(), cls);
    t.suffix_ids.push_back(sep);
    return;
  }
  if (type == "TemplateProcessing") {
    std::vector<int32_t> pre, post;
    bool seen_a = false;
    for (auto& item : p.at("single")) {
      if (item.contains("Sequence")) { seen_a = true; continue; }
      std::string id = item.at("SpecialToken").at("id").get<std::string>();
      const json& st = p.at("special_tokens").at(id);
      for (auto& x : st.at("ids")) (seen_a ? post : pre).push_back(x.get<int32_t>());
    }
    t.prefix_ids.insert(t.prefix_ids.begin(), pre.begin(), pre.end());
    t.suffix_ids.insert(t.suffix_ids.end(), post.begin(), post.end());
    return;
  }
  throw Error("unsupported post-processor type '" + type + "'");
}

std::string token_text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content")) return j["content"].get<std::string>();
  return "";
}
}  // namespace

std::unique_ptr<PipelineTokenizer> load_tokenizer_json(const std::string& path,
                                                       const std::string& config_path) {
  std::string text = read_file(path);
  auto t = std::make_unique<PipelineTokenizer>();
  try {
    ParsedTokenizerJson pj = parse_tokenizer_json(text);
    const json& j = pj.doc;
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) throw Error("no 'model' object");
    t->model = make_model(j.at("model"), pj, *t);
    t->normalizer = make_normalizer(j.value("normalizer", json()));
    t->pre_tokenizer = make_pre_tokenizer(j.value("pre_tokenizer", json()));
    t->decoder = make_decoder(j.value("decoder", json()));
    add_post_processor(j.value("post_processor", json()), *t, nullptr);
    std::vector<AddedToken> added;
    std::unordered_map<std::string, int32_t> by_content;
    for (auto& a : j.value("added_tokens", json::array())) {
      AddedToken at;
      at.id = a.at("id").get<int32_t>();
      if (at.id < 0 || at.id > (1 << 26)) throw Error("added token id out of range");
      at.content = a.at("content").get<std::string>();
      at.special = a.value("special", false);
      at.lstrip = a.value("lstrip", false);
      at.rstrip = a.value("rstrip", false);
      at.single_word = a.value("single_word", false);
      at.normalized = a.value("normalized", !at.special);
      t->pieces.set(at.id, at.content);
      by_content[at.content] = at.id;
      added.push_back(at);
    }
    t->add_tokens(added);

    if (!config_path.empty() && std::filesystem::exists(config_path)) {
      json c = json::parse(read_file(config_path));
      auto lookup = [&](const std::string& s) -> std::optional<int32_t> {
        auto it = by_content.find(s);
        if (it != by_content.end()) return it->second;
        for (size_t i = 0; i < t->pieces.size(); ++i)
          if (t->pieces.has(i) && t->pieces.get(i) == s) return static_cast<int32_t>(i);
        return std::nullopt;
      };
      if (c.contains("bos_token")) {
        t->bos_text = token_text(c["bos_token"]);
        if (!t->bos_text.empty()) t->bos = lookup(t->bos_text);
      }
      if (c.contains("eos_token")) {
        t->eos_text = token_text(c["eos_token"]);
        if (auto id = lookup(t->eos_text)) t->eos.push_back(*id);
      }
      if (c.contains("chat_template")) {
        auto& ct = c["chat_template"];
        if (ct.is_string()) t->chat_tmpl = ct.get<std::string>();
        else if (ct.is_array())
          for (auto& e : ct)
            if (e.value("name", std::string()) == "default") t->chat_tmpl = e.value("template", std::string());
      }
    }
    auto dir = std::filesystem::path(path).parent_path();
    auto jinja = dir / "chat_template.jinja";
    if (std::filesystem::exists(jinja)) t->chat_tmpl = read_file(jinja.string());
    t->pieces.shrink_to_fit();
  } catch (const FileError&) {
    throw;
  } catch (const std::exception& e) {
    throw FileError(path, std::string("invalid tokenizer: ") + e.what());
  }
  return t;
}

}  // namespace rapid::tok
