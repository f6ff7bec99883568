// The parts of a multi-token-prediction head (Qwen3-Next / Qwen3.5 `mtp.*` weights) that do not
// depend on the architecture: its input fc over [norm(embedding), norm(hidden)], its final norm
// and the shared lm_head, and the checks and KV bookkeeping of a forward_mtp call. The decoder
// layer(s) between input and output are the architecture's own (DecoderModel: a plain decoder
// layer; Qwen3.5: a gated full-attention layer), run by the model over the rows this returns.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/layers.h"
#include "model/model.h"
#include "model/paged_kv.h"

namespace rapid::model {

class MtpHead {
 public:
  // One entry's rows in the forward: its KV, first position and rows [row, row + n).
  struct Rows {
    PagedKvState* kv;
    int64_t pos0, row, n;
  };
  using NormLoader = std::function<std::vector<float>(const std::string& name)>;

  // Number of `mtp.layers.N` in the weights (0: no head).
  static int count_layers(const WeightStore& ws);
  // mtp.fc [H, 2H], mtp.pre_fc_norm_embedding / _hidden and mtp.norm (read by `norm`, so the
  // architecture's norm convention applies); `add_one`: its rms_norm scales by (1 + w).
  void load(const WeightStore& ws, int64_t hidden, float eps, bool add_one, const NormLoader& norm);
  Linear& fc() { return fc_; }

  // Checks every entry before touching any state (states from new_mtp_state of this geometry,
  // one layer index for all, tokens in the vocabulary, room in the KV), then appends their KV.
  // Returns the rows of each entry (packed in entry order) and their total.
  int64_t admit(const MtpEntry* entries, size_t count, int layers, int64_t vocab,
                const std::function<void(const cache::BlockShape&)>& check_shape, std::vector<Rows>& out) const;
  // x[r] = fc(cat[norm_e(embed(token_r)), norm_h(hidden_r)]) for every row; `embed` writes the
  // (scaled) embedding of a token into its H-float buffer.
  void input(const MtpEntry* entries, const std::vector<Rows>& rows, int64_t total,
             const std::function<void(int32_t, float*)>& embed, float* x, ExecContext& ctx);
  // mtp.norm of each entry's last row (→ hidden_out), the lm_head over them (→ logits).
  void output(const MtpEntry* entries, const std::vector<Rows>& rows, const float* x, const Linear& lm_head,
              int64_t vocab, ExecContext& ctx);

 private:
  Linear fc_;
  std::vector<float> norm_emb_, norm_hidden_, norm_;
  int64_t H_ = 0;
  float eps_ = 1e-6f;
  bool add_one_ = false;
  std::vector<float> cat_, emb_, xn_, logits_;
};

}  // namespace rapid::model
