#include "hub/model_files.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

#include "common/error.h"

namespace rapid::hub {
namespace {
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && lower(s.substr(s.size() - suffix.size())) == suffix;
}
std::string base_name(const std::string& p) { return p.substr(p.rfind('/') + 1); }

// What a safetensors model is read with, besides its weights.
const std::set<std::string> kSideFiles = {
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "added_tokens.json", "chat_template.jinja", "chat_template.json",
    "vocab.json", "merges.txt", "tokenizer.model", "model.safetensors.index.json"};

const std::regex kSplit(R"(^(.*)-(\d{5})-of-(\d{5})\.gguf$)", std::regex::icase);

// Quantization names as GGUF repos spell them in file names (Q4_K_M, IQ4_XS, Q8_0, BF16, F16, MXFP4...).
const std::regex kQuant(R"((?:^|[-_.])((?:I?Q\d(?:_[A-Z0-9]+)*)|BF16|F16|F32|MXFP4(?:_MOE)?)(?=[-_.]))", std::regex::icase);

ModelFiles pick_gguf(const std::vector<std::string>& ggufs, const std::string& quant) {
  std::vector<std::string> match;
  for (auto& f : ggufs)
    if (lower(gguf_quant_of(f)) == lower(quant)) match.push_back(f);
  if (match.empty()) {
    std::set<std::string> have;
    for (auto& f : ggufs) have.insert(gguf_quant_of(base_name(f)).empty() ? base_name(f) : gguf_quant_of(base_name(f)));
    std::string list;
    for (auto& h : have) list += (list.empty() ? "" : ", ") + h;
    throw Error("no GGUF for quantization '" + quant + "' (the repo has: " + list + ")");
  }
  // Several files of one quantization: one model split in parts, or several models (then the
  // shortest name: the plain one, not a variant such as an "-imatrix" copy).
  std::smatch m;
  std::string first = *std::min_element(match.begin(), match.end(), [](auto& a, auto& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  ModelFiles out;
  out.format = "gguf";
  if (std::regex_match(first, m, kSplit)) {
    std::string stem = m[1], total = m[3];
    for (auto& f : match) {
      std::smatch n;
      if (!std::regex_match(f, n, kSplit) || n[1] != stem || n[3] != total) continue;
      out.files.push_back(f);
      if (n[2] == "00001") out.entry = f;
    }
    if (out.files.size() != static_cast<size_t>(std::stoi(total)))
      throw Error("GGUF '" + stem + "' is split in " + total + " parts but the repo lists " + std::to_string(out.files.size()));
  } else {
    out.files = {first};
    out.entry = first;
  }
  std::sort(out.files.begin(), out.files.end());
  return out;
}
}  // namespace

std::string gguf_quant_of(const std::string& filename) {
  std::string name = base_name(filename);
  std::smatch m;
  std::string found;
  for (auto it = name.cbegin(); std::regex_search(it, name.cend(), m, kQuant); it = m[1].second) found = m[1];
  for (char& c : found) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return found;
}

ModelFiles select_model_files(const std::vector<std::string>& repo_files, const std::string& quant) {
  std::vector<std::string> ggufs, weights;
  for (auto& f : repo_files) {
    std::string b = lower(base_name(f));
    if (ends_with(f, ".gguf") && b.find("mmproj") == std::string::npos) ggufs.push_back(f);
    if (ends_with(f, ".safetensors") && f.find('/') == std::string::npos) weights.push_back(f);
  }
  if (!quant.empty()) {
    if (ggufs.empty()) throw Error("':" + quant + "' chooses a GGUF file, but the repo has none");
    return pick_gguf(ggufs, quant);
  }
  bool has_config = std::find(repo_files.begin(), repo_files.end(), "config.json") != repo_files.end();
  if (!weights.empty() && has_config) {
    ModelFiles out;
    out.format = "safetensors";
    for (auto& f : repo_files)
      if (kSideFiles.count(f)) out.files.push_back(f);
    out.files.insert(out.files.end(), weights.begin(), weights.end());
    std::sort(out.files.begin(), out.files.end());
    return out;
  }
  if (!ggufs.empty()) {
    // The usual 4-bit choices first, then larger, then smaller: the K types, then the IQ1-IQ3
    // lattice types (whose kernels are slower per weight), then unquantized files.
    for (const char* q : {"Q4_K_M", "Q4_K_S", "IQ4_XS", "Q4_0", "Q4_1", "IQ4_NL", "Q5_K_M", "Q5_K_S", "Q6_K", "Q8_0",
                          "Q3_K_L", "Q3_K_M", "Q3_K_S", "Q2_K_L", "Q2_K", "IQ3_M", "IQ3_S", "IQ3_XS", "IQ3_XXS",
                          "IQ2_M", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ1_M", "IQ1_S", "BF16", "F16", "F32"})
      for (auto& f : ggufs)
        if (gguf_quant_of(f) == q) return pick_gguf(ggufs, q);
    return pick_gguf(ggufs, gguf_quant_of(ggufs.front()).empty() ? std::string() : gguf_quant_of(ggufs.front()));
  }
  throw Error(weights.empty() ? "no model weights (safetensors or GGUF) in the repo"
                              : "safetensors weights without a config.json");
}

}  // namespace rapid::hub
