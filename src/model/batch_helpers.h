// Pieces the paged-KV models (the shared decoder, Gemma 4) share around forward_batch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "model/model.h"

namespace rapid::model {

// A sequence with a private pool sized for max_tokens (Model::new_state): pages are virtual until
// written, so resident memory follows the tokens actually used.
std::unique_ptr<SequenceState> private_paged_state(const Model& m, int64_t max_tokens);

// Copies the packed logits rows of a batch (per entry that has a logits buffer, in entry order: its
// last row, or all its rows with all_logits) into each entry's buffer.
void scatter_logits(const BatchEntry* entries, size_t count, const float* packed, int64_t vocab);

}  // namespace rapid::model
