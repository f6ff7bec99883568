// Chunk-parallel (WY) form of the gated delta rule for prefill, after the Gated DeltaNet paper's
// chunked algorithm (as in transformers' torch_chunk_gated_delta_rule). Per chunk of L tokens
// and value head, with Γ_i = Σ_{j≤i} log g_j (within the chunk) and S the state entering it:
//   A_ij = −β_i (k_i·k_j) e^{Γ_i−Γ_j}  (j < i),  T = (I − A)⁻¹ by forward substitution
//   U = T (β v),  W = T (β e^{Γ} k),  V' = U − W Sᵀ
//   o_i = e^{Γ_i} S q_i + Σ_{j≤i} (q_i·k_j) e^{Γ_i−Γ_j} V'_j
//   S ← e^{Γ_L} S + Σ_i V'_i (e^{Γ_L−Γ_i} k_i)ᵀ
// All inner loops are dot/axpy over Dk-long rows through the ISA-dispatched Kernels table.
#include <algorithm>
#include <cmath>
#include <vector>

#include "compute/gated_delta.h"
#include "compute/kernels.h"

namespace rapid::compute {
namespace {

struct Scratch {
  std::vector<float> T, G, kb, u, w, vn, qg, kd;
  void fit(int64_t L, int64_t dk, int64_t dv) {
    T.resize(L * L);
    G.resize(L);
    kb.resize(L * dk);
    u.resize(L * dv);
    w.resize(L * dk);
    vn.resize(L * dv);
    qg.resize(L * dk);
    kd.resize(L * dk);
  }
};

// One chunk of `L` tokens of one value head. q/k/v rows at stride ld; y rows at stride ldy.
void chunk(const Kernels& kr, Scratch& s, const float* q, const float* k, int64_t ld, const float* v,
           const float* log_g, const float* beta, int64_t lgs, int64_t L, int64_t dk, int64_t dv, float* S,
           float* y, int64_t ldy) {
  float* G = s.G.data();
  float acc = 0;
  for (int64_t i = 0; i < L; ++i) G[i] = acc += log_g[i * lgs];
  // T = (I − A)⁻¹ with A strictly lower: row i of T from the rows above it.
  float* T = s.T.data();
  for (int64_t i = 0; i < L; ++i) {
    float* Ti = T + i * L;
    const float bi = beta[i * lgs];
    for (int64_t j = 0; j < i; ++j) Ti[j] = -bi * kr.dot_f32(k + i * ld, k + j * ld, dk) * std::exp(G[i] - G[j]);
    // T_ij = a_ij + Σ_{j<m<i} a_im T_mj with a the original row: ascending j reads the entries
    // m > j before they are overwritten, and the rows m < i above are final.
    for (int64_t j = 0; j < i; ++j) {
      float add = 0;
      for (int64_t m = j + 1; m < i; ++m) add += Ti[m] * T[m * L + j];
      Ti[j] += add;
    }
    Ti[i] = 1.0f;
    for (int64_t j = i + 1; j < L; ++j) Ti[j] = 0.0f;
  }
  // U = T (β v), W = T (β e^Γ k).
  float* u = s.u.data();
  float* w = s.w.data();
  for (int64_t i = 0; i < L; ++i) {
    float* ui = u + i * dv;
    float* wi = w + i * dk;
    for (int64_t d = 0; d < dv; ++d) ui[d] = 0;
    for (int64_t d = 0; d < dk; ++d) wi[d] = 0;
    for (int64_t j = 0; j <= i; ++j) {
      const float t = T[i * L + j] * beta[j * lgs];
      kr.axpy_f32(t, v + j * ld, ui, dv);
      kr.axpy_f32(t * std::exp(G[j]), k + j * ld, wi, dk);
    }
  }
  // V' = U − W Sᵀ (S is [dv][dk]); the inter-chunk output e^Γ S q.
  float* vn = s.vn.data();
  float* qg = s.qg.data();
  for (int64_t i = 0; i < L; ++i) {
    const float e = std::exp(G[i]);
    for (int64_t d = 0; d < dk; ++d) qg[i * dk + d] = q[i * ld + d] * e;
    for (int64_t r = 0; r < dv; ++r) {
      const float* Sr = S + r * dk;
      vn[i * dv + r] = u[i * dv + r] - kr.dot_f32(w + i * dk, Sr, dk);
      y[i * ldy + r] = kr.dot_f32(qg + i * dk, Sr, dk);
    }
  }
  // Intra-chunk output.
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j <= i; ++j)
      kr.axpy_f32(kr.dot_f32(q + i * ld, k + j * ld, dk) * std::exp(G[i] - G[j]), vn + j * dv, y + i * ldy, dv);
  // State to the chunk's end.
  float* kd = s.kd.data();
  const float gl = G[L - 1];
  for (int64_t i = 0; i < L; ++i) {
    const float e = std::exp(gl - G[i]);
    for (int64_t d = 0; d < dk; ++d) kd[i * dk + d] = k[i * ld + d] * e;
  }
  const float el = std::exp(gl);
  for (int64_t r = 0; r < dv; ++r) {
    float* Sr = S + r * dk;
    for (int64_t d = 0; d < dk; ++d) Sr[d] *= el;
    for (int64_t i = 0; i < L; ++i) kr.axpy_f32(vn[i * dv + r], kd + i * dk, Sr, dk);
  }
}

}  // namespace

void gated_delta_chunked(const GatedDeltaShape& s, const float* qkv, int64_t ld, const float* log_g,
                         const float* beta, int64_t n, float* state, float* y, int64_t ldy, int64_t h0, int64_t h1) {
  const Kernels& kr = kernels();
  thread_local Scratch sc;
  sc.fit(kGatedDeltaChunk, s.k_dim, s.v_dim);
  const int64_t key_dim = s.k_heads * s.k_dim;
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t kh = s.k_head(h) * s.k_dim;
    float* S = state + h * s.v_dim * s.k_dim;
    for (int64_t t0 = 0; t0 < n; t0 += kGatedDeltaChunk) {
      const int64_t L = std::min<int64_t>(kGatedDeltaChunk, n - t0);
      const float* row = qkv + t0 * ld;
      chunk(kr, sc, row + kh, row + key_dim + kh, ld, row + 2 * key_dim + h * s.v_dim, log_g + t0 * s.v_heads + h,
            beta + t0 * s.v_heads + h, s.v_heads, L, s.k_dim, s.v_dim, S, y + t0 * ldy + h * s.v_dim, ldy);
    }
  }
}

}  // namespace rapid::compute
