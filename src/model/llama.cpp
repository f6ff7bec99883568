#include "model/arch.h"

namespace rapid::model {

// Pre-norm decoder: RMSNorm → GQA attention with RoPE → residual → RMSNorm → SwiGLU → residual.
ArchSpec llama_arch() {
  ArchSpec s;
  s.name = "llama";
  return s;
}

}  // namespace rapid::model
