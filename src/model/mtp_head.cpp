#include "model/mtp_head.h"

#include <cstring>

#include "common/error.h"
#include "compute/ops.h"

namespace rapid::model {

int MtpHead::count_layers(const WeightStore& ws) {
  if (!ws.find("mtp.fc.weight")) return 0;
  int n = 0;
  while (ws.find("mtp.layers." + std::to_string(n) + ".input_layernorm.weight")) ++n;
  return n;
}

void MtpHead::load(const WeightStore& ws, int64_t hidden, float eps, bool add_one, const NormLoader& norm) {
  H_ = hidden;
  eps_ = eps;
  add_one_ = add_one;
  fc_ = load_linear(ws, "mtp.fc", H_, 2 * H_);
  norm_emb_ = norm("mtp.pre_fc_norm_embedding.weight");
  norm_hidden_ = norm("mtp.pre_fc_norm_hidden.weight");
  norm_ = norm("mtp.norm.weight");
}

int64_t MtpHead::admit(const MtpEntry* entries, size_t count, int layers, int64_t vocab,
                       const std::function<void(const cache::BlockShape&)>& check_shape,
                       std::vector<Rows>& out) const {
  out.clear();
  int64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const MtpEntry& e = entries[i];
    auto* kv = dynamic_cast<PagedKvState*>(e.state);
    if (!kv) throw Error("forward_mtp: state was not created by new_mtp_state");
    if (e.n <= 0 || !e.tokens || !e.hidden || !e.logits) throw Error("forward_mtp: empty entry");
    if (e.layer < 0 || e.layer >= layers) throw Error("forward_mtp: no MTP layer " + std::to_string(e.layer));
    // One call runs one layer (one draft step), so its entries share the layer index.
    if (e.layer != entries[0].layer) throw Error("forward_mtp: entries must use the same MTP layer");
    check_shape(kv->pool().shape());
    for (const Rows& r : out)
      if (r.kv == kv) throw Error("forward_mtp: the same state appears twice");
    if (kv->length() + e.n > kv->capacity()) throw Error("forward_mtp: the MTP state is full");
    for (int64_t t = 0; t < e.n; ++t)
      if (e.tokens[t] < 0 || e.tokens[t] >= vocab) throw Error("forward_mtp: token id outside the vocabulary");
    if (kv->blocks_needed(e.n) > static_cast<int64_t>(kv->pool().free_count()))
      throw Error("forward_mtp: MTP KV pool is full");
    out.push_back(Rows{kv, kv->length(), total, e.n});
    total += e.n;
  }
  for (size_t i = 0; i < count; ++i) out[i].kv->append(entries[i].n);
  return total;
}

void MtpHead::input(const MtpEntry* entries, const std::vector<Rows>& rows, int64_t total,
                    const std::function<void(int32_t, float*)>& embed, float* x, ExecContext& ctx) {
  cat_.resize(static_cast<size_t>(total * 2 * H_));
  emb_.resize(static_cast<size_t>(H_));
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t t = 0; t < rows[i].n; ++t) {
      float* c = cat_.data() + (rows[i].row + t) * 2 * H_;
      embed(entries[i].tokens[t], emb_.data());
      compute::rms_norm(emb_.data(), norm_emb_.data(), H_, eps_, add_one_, c);
      compute::rms_norm(entries[i].hidden + t * H_, norm_hidden_.data(), H_, eps_, add_one_, c + H_);
    }
  fc_(cat_.data(), total, x, ctx);
}

void MtpHead::output(const MtpEntry* entries, const std::vector<Rows>& rows, const float* x, const Linear& lm_head,
                     int64_t vocab, ExecContext& ctx) {
  const size_t count = rows.size();
  xn_.resize(count * static_cast<size_t>(H_));
  for (size_t i = 0; i < count; ++i) {
    const Rows& s = rows[i];
    compute::rms_norm(x + (s.row + s.n - 1) * H_, norm_.data(), H_, eps_, add_one_, xn_.data() + i * H_);
    if (entries[i].hidden_out) std::memcpy(entries[i].hidden_out, xn_.data() + i * H_, static_cast<size_t>(H_) * 4);
  }
  logits_.resize(count * static_cast<size_t>(vocab));
  lm_head(xn_.data(), static_cast<int64_t>(count), logits_.data(), ctx);
  for (size_t i = 0; i < count; ++i)
    std::memcpy(entries[i].logits, logits_.data() + i * vocab, static_cast<size_t>(vocab) * 4);
}

}  // namespace rapid::model
