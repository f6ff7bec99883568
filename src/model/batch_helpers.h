// Pieces the paged-KV models (the shared decoder, Gemma 4) share around forward_batch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include <string>
#include <vector>

#include "cache/block_pool.h"
#include "model/layers.h"
#include "model/model.h"
#include "model/paged_kv.h"

namespace rapid::model {

// A sequence with a private pool sized for max_tokens (Model::new_state): pages are virtual until
// written, so resident memory follows the tokens actually used.
std::unique_ptr<SequenceState> private_paged_state(const Model& m, int64_t max_tokens);

// Copies the packed logits rows of a batch (per entry that has a logits buffer, in entry order: its
// last row, or all its rows with all_logits) into each entry's buffer.
void scatter_logits(const BatchEntry* entries, size_t count, const float* packed, int64_t vocab);

// Refuses a KV pool whose geometry is not `want` (the model's for that block size), naming both.
void check_block_shape(const cache::BlockShape& got, const cache::BlockShape& want, const std::string& model);

// Model::new_paged_state of a model whose states are plain PagedKvState over pools of its
// kv_block_shape (`model` names it in the refusal of another pool).
std::unique_ptr<SequenceState> checked_paged_state(const Model& m, std::shared_ptr<cache::BlockPool> pool,
                                                   int64_t max_tokens, const std::string& model);

// Layer `layer` of every sequence of a batch: stores its rows' K and V (k, v [rows][kv_heads *
// head_dim]) in its pages, and points its attention segment at its rows of q and out
// ([rows][q_width]).
void store_kv_segments(const std::vector<PagedSeq>& seqs, int32_t layer, int64_t kv_heads, int64_t head_dim,
                       int64_t q_width, const float* q, const float* k, const float* v, float* out,
                       std::vector<compute::AttentionSegment>& segs);

// The end of a batched forward over rows x [total][hidden]: the final RMSNorm (weight `norm`) of
// each row an entry wants (its hidden states, copied out, or its logits), then lm_head over the
// logits rows packed into xn, softcapped when softcap > 0, and split per entry (scatter_logits).
struct FinalHead {
  const std::vector<float>& norm;
  float eps;
  const Linear& lm_head;
  int64_t hidden, vocab;
  float softcap = 0.0f;
};
void final_head(const FinalHead& h, const BatchEntry* entries, size_t count, const std::vector<PagedSeq>& seqs,
                const float* x, float* xn, std::vector<float>& logits, ExecContext& ctx);

}  // namespace rapid::model
