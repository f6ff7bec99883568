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
