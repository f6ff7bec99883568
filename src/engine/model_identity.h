// Identity of a loaded model for the disk KV cache: snapshots from other weights, another
// tokenizer or another KV dtype must never be served. Hashing every byte of a multi-GB checkpoint
// at each start would cost seconds, so weights are fingerprinted by file names, sizes and sampled
// content (head, tail and a 4 KiB page every 64 MiB); tokenizer files are small and hashed whole.
#pragma once
#include <string>

#include "cache/block_pool.h"
#include "model/weights.h"

namespace rapid::engine {

std::string weights_fingerprint(const model::Checkpoint& ckpt);    // 16 hex digits
std::string tokenizer_fingerprint(const model::Checkpoint& ckpt);  // 16 hex digits
// The directory key for this model's snapshots (cache::model_identity_key). numerics_id: the
// build's arithmetic (empty: this build's, cmake/numerics_id.cmake): KV from a build that rounds
// differently would change this one's output, so it lives under another key.
std::string kv_snapshot_key(const model::Checkpoint& ckpt, cache::KvDType kv_dtype, int32_t block_size,
                            const std::string& numerics_id = "");

}  // namespace rapid::engine
