#include "server/model_registry.h"

#include <algorithm>

#include "common/log.h"

namespace rapid::server {

bool glob_match(const std::string& pattern, const std::string& name) {
  // Iterative wildcard match: on a mismatch, let the last `*` swallow one more character.
  size_t p = 0, n = 0, star = std::string::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p, ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

ModelRegistry::ModelRegistry(std::vector<ServedModel> models, ModelLoader loader, RegistryLimits limits,
                             std::vector<std::pair<std::string, std::string>> patterns)
    : patterns_(std::move(patterns)), loader_(std::move(loader)), limits_(limits) {
  for (ServedModel& m : models) entries_.push_back(Entry{std::move(m), {}, 0, {}, false});
}

std::shared_ptr<ModelRegistry> ModelRegistry::single(Backend& backend,
                                                     std::vector<std::pair<std::string, std::string>> patterns) {
  auto r = std::make_shared<ModelRegistry>(std::vector<ServedModel>{{backend.model_id(), {}, ""}}, nullptr,
                                           RegistryLimits{}, std::move(patterns));
  r->entries_[0].loaded.backend = std::shared_ptr<Backend>(&backend, [](Backend*) {});  // the caller owns it
  r->entries_[0].pinned = true;
  return r;
}

int ModelRegistry::find(const std::string& name) const {
  if (entries_.empty()) return -1;
  if (name.empty()) return 0;
  auto by_name = [&](const std::string& n) -> int {
    for (size_t i = 0; i < entries_.size(); ++i) {
      const ServedModel& s = entries_[i].spec;
      if (s.name == n || std::find(s.aliases.begin(), s.aliases.end(), n) != s.aliases.end()) return int(i);
    }
    return -1;
  };
  if (int i = by_name(name); i >= 0) return i;
  for (const auto& [pattern, target] : patterns_)
    if (glob_match(pattern, name)) return by_name(target);
  return -1;
}

bool ModelRegistry::knows(const std::string& name) const {
  std::lock_guard lk(mu_);
  return find(name) >= 0;
}

std::string ModelRegistry::canonical(const std::string& name) const {
  std::lock_guard lk(mu_);
  int i = find(name);
  return i < 0 ? name : entries_[i].spec.name;
}

ApiError ModelRegistry::not_found(const std::string& name) const {
  std::string list;
  for (const Entry& e : entries_) list += (list.empty() ? "'" : ", '") + e.spec.name + "'";
  return ApiError(404, "The model '" + name + "' does not exist; this server serves " +
                           (list.empty() ? std::string("no chat model (embeddings only)") : list),
                  "model", "model_not_found");
}

std::shared_ptr<Backend> ModelRegistry::acquire(const std::string& name, bool load_it) {
  std::unique_lock lk(mu_);
  int i = find(name);
  if (i < 0) throw not_found(name);
  Entry& e = entries_[i];
  if (e.loaded.backend) {
    e.last_used = ++clock_;
    return e.loaded.backend;
  }
  if (!load_it)
    throw ApiError(404, "The model '" + e.spec.name + "' is not loaded (its next chat, completion or messages request loads it)",
                   "model", "model_not_loaded");
  e.last_used = ++clock_;
  return load(i, lk);
}

// The first request for an unloaded model loads it; the ones arriving meanwhile wait for the
// same load instead of starting their own.
std::shared_ptr<Backend> ModelRegistry::load(int i, std::unique_lock<std::mutex>& lk) {
  std::shared_future<LoadedModel> fut = entries_[i].loading;
  std::promise<LoadedModel> done;
  const bool mine = !fut.valid();
  if (mine) entries_[i].loading = fut = done.get_future().share();
  const ServedModel spec = entries_[i].spec;
  lk.unlock();
  if (mine) {
    std::lock_guard one(load_mu_);
    std::vector<std::shared_ptr<Backend>> dropped;  // destroyed outside mu_ (engines join threads)
    try {
      {
        std::lock_guard relock(mu_);
        dropped = evict_for(i);  // room by count before loading, so the old one's memory goes first
      }
      dropped.clear();
      log::info("loading model '" + spec.name + "'");
      LoadedModel m = loader_ ? loader_(spec) : LoadedModel{};
      if (!m.backend) throw std::runtime_error("no loader for it");
      {
        std::lock_guard relock(mu_);
        entries_[i].loaded = m;
        entries_[i].loading = {};
        ++loads_;
        dropped = evict_for(i);  // the memory budget, now that this one's size is known
      }
      done.set_value(std::move(m));
    } catch (...) {
      {
        std::lock_guard relock(mu_);
        entries_[i].loading = {};
      }
      done.set_exception(std::current_exception());
    }
  }
  try {
    return fut.get().backend;
  } catch (const std::exception& ex) {
    throw ApiError(503, "cannot load the model '" + spec.name + "': " + ex.what(), "model", "model_load_failed");
  }
}

// Unloads the least recently used models (never `keep`, never a pinned one) until, with `keep`
// counted as loaded, the count and the memory fit the limits. Returns what it dropped.
std::vector<std::shared_ptr<Backend>> ModelRegistry::evict_for(int keep) {
  std::vector<std::shared_ptr<Backend>> dropped;
  for (;;) {
    size_t n = 1;
    uint64_t bytes = entries_[keep].loaded.bytes;
    int lru = -1;
    for (int j = 0; j < int(entries_.size()); ++j) {
      const Entry& e = entries_[j];
      if (j == keep || !e.loaded.backend) continue;
      ++n;
      bytes += e.loaded.bytes;
      if (!e.pinned && (lru < 0 || e.last_used < entries_[lru].last_used)) lru = j;
    }
    bool over = (limits_.max_loaded && n > limits_.max_loaded) || (limits_.max_bytes && bytes > limits_.max_bytes);
    if (!over || lru < 0) return dropped;
    log::info("unloading model '" + entries_[lru].spec.name + "' (least recently used)");
    dropped.push_back(std::move(entries_[lru].loaded.backend));
    entries_[lru].loaded = {};
    ++unloads_;
  }
}

void ModelRegistry::put_loaded(const std::string& name, LoadedModel m) {
  std::vector<std::shared_ptr<Backend>> dropped;
  std::lock_guard lk(mu_);
  int i = find(name);
  if (i < 0) throw not_found(name);
  entries_[i].loaded = std::move(m);
  entries_[i].last_used = ++clock_;
  ++loads_;
  dropped = evict_for(i);
}

std::vector<ModelStatus> ModelRegistry::status() const {
  std::lock_guard lk(mu_);
  std::vector<ModelStatus> out;
  for (const Entry& e : entries_) {
    const Backend* b = e.loaded.backend.get();
    out.push_back({e.spec.name, e.spec.aliases, b != nullptr, e.loaded.bytes, b ? b->context_length() : 0});
  }
  return out;
}

std::shared_ptr<Backend> ModelRegistry::any_loaded() const {
  std::lock_guard lk(mu_);
  if (!entries_.empty() && entries_[0].loaded.backend) return entries_[0].loaded.backend;
  const Entry* best = nullptr;
  for (const Entry& e : entries_)
    if (e.loaded.backend && (!best || e.last_used > best->last_used)) best = &e;
  return best ? best->loaded.backend : nullptr;
}

std::string ModelRegistry::default_name() const { return entries_.empty() ? "" : entries_[0].spec.name; }

uint64_t ModelRegistry::loads() const {
  std::lock_guard lk(mu_);
  return loads_;
}

uint64_t ModelRegistry::unloads() const {
  std::lock_guard lk(mu_);
  return unloads_;
}

}  // namespace rapid::server
