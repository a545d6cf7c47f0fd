// GLM-4.7-Flash's latent attention on the device (GpuTransformer::latent_attention): the CPU's
// Transformer::project_mla and expand_mla_values (model/mla.cc, its reference) as dispatches.
// The cache holds each token's compressed K/V row and its key's rotary part (one KV head of
// kv_lora + rope values, K rows only: the attention reads its values from them); each query
// head is moved into that space by its key expansion wk_b, and each head's output is expanded
// by its wv_b. The per-head matrices are gpu::matmul_experts' experts, a (token, head) row a
// slot, its head the expert (mla_heads_): a slot at a time for a few tokens, grouped by head
// (gpu::matmul_experts_grouped's tiles) from as many as the dense matmuls tile.
#include <algorithm>

#include "model/transformer_gpu.h"

namespace glm::model {
namespace {

constexpr size_t kF = sizeof(float);

// mla_'s parts for n tokens, as byte offsets, each on 16 bytes (the matmuls read their rows 16
// bytes at a time): the query's compressed rows qa [n, q_lora] and their norm qn [n, q_lora]
// (unused where wq_b's matmul norms qa as it reads it), its heads qf [n, n_head k_head] (a
// token's every nope part [n_head, nope], then every rope part [n_head, rope]: the upload's
// order of wq_b's rows), the nope parts gathered contiguous, rows [n n_head, nope] (for more
// than one token), the heads' expanded values v [n, n_head v_head] (wo's input), and the slots
// grouped by head (gpu::ExpertGroups: counts [n_head], lists [n_head, n]).
struct MlaScratch {
  size_t qa = 0, qn = 0, qf = 0, rows = 0, v = 0, counts = 0, lists = 0;

  MlaScratch(const Config& c, int n) {
    const MlaConfig& m = c.mla;
    const size_t t = static_cast<size_t>(n), h = static_cast<size_t>(c.n_head);
    size_t at = 0;
    auto part = [&](size_t floats) {
      const size_t o = at;
      at = (at + floats * kF + 15) / 16 * 16;
      return o;
    };
    qa = part(t * m.q_lora);
    qn = part(t * m.q_lora);
    qf = part(t * h * m.k_head);
    rows = part(t * h * c.mla_nope());
    v = part(t * h * m.v_head);
    counts = part(h);
    lists = part(t * h);
  }
  // Floats a token: the counts' n_head counted for every token, with room for the seven parts'
  // rounding.
  static int floats_per_token(const Config& c) {
    const MlaConfig& m = c.mla;
    return 2 * m.q_lora + c.n_head * (m.k_head + c.mla_nope() + m.v_head + 2) + 7 * 4;
  }
};

}  // namespace

int GpuTransformer::mla_floats_per_token(const Config& c) {
  return c.is_mla() ? MlaScratch::floats_per_token(c) : 0;
}

void GpuTransformer::latent_attention(gpu::Stream& st, const std::vector<SeqInput>& batch,
                                      const Step& step, const Layer& g, const CacheRef& cache,
                                      const gpu::MatmulInput& in, gpu::Addr x, int l) {
  const Config& c = config_;
  const MlaConfig& m = c.mla;
  const int n = step.n, nh = c.n_head, kl = m.kv_lora, rope = c.n_rot, nope = c.mla_nope();
  const int kh = m.k_head;
  const int hd = c.head_dim;  // kv_lora + rope: a cache row, and an absorbed query head
  const MlaScratch o(c, n);
  const gpu::Addr qa = at(mla_, o.qa), qn = at(mla_, o.qn), qf = at(mla_, o.qf),
                  gathered = at(mla_, o.rows), v = at(mla_, o.v), heads = at(mla_heads_);
  // GpuModel::attend's latent layout of qkv_: the absorbed queries q [n, n_head, kv_lora +
  // rope], then the K rows k [n, kv_lora + rope].
  const gpu::Addr q = at(qkv_), k = at(qkv_, static_cast<size_t>(n) * c.q_dim() * kF);
  const gpu::Addr cs = at(in_dev_, step.cos), sn = at(in_dev_, step.sin);
  // y [n n_head, y_stride] = each (token, head) row of x [n n_head, w.n_cols] times its head's
  // `rows` rows of w.
  const bool grouped = gpu::groups_expert_slots(n);
  gpu::ExpertGroups groups;
  groups.slots = at(mla_, o.lists);
  groups.counts = at(mla_, o.counts);
  groups.n_expert = nh;
  groups.cap = n;
  if (grouped) gpu::moe_group(st, heads, n * nh, groups);
  auto per_head = [&](const gpu::Matrix& w, int rows, gpu::Addr x, gpu::Addr y, int y_stride) {
    if (grouped) {
      gpu::matmul_experts_grouped(st, w, rows, groups, x, 1, y, y_stride, 0);
    } else {
      gpu::matmul_experts(st, w, rows, heads, x, 1, y, n * nh, y_stride, 0);
    }
  };
  // The query: qa, then its heads qf from qa's norm (by wq_b's matmul as it reads qa where it
  // takes a fused input: a few tokens; else a dispatch into qn).
  gpu::matmul(st, g.wq_a, in, qa, n);
  gpu::MatmulInput qa_normed = gpu::MatmulInput::rms_normed(qa, at(g.q_a_norm), c.norm_eps);
  if (!gpu::fuses_input(n)) {
    gpu::rms_norm(st, qa, at(g.q_a_norm), qn, n, m.q_lora, c.norm_eps);
    qa_normed = qn;
  }
  gpu::matmul(st, g.wq_b, qa_normed, qf, n);
  // The K rows: the compressed row normed (its rotary part is rotated by the cache's store).
  gpu::matmul(st, g.wkv_a, in, k, n);
  gpu::head_norm(st, k, at(g.kv_a_norm), n, hd, /*n_head=*/1, /*n_q=*/1, kl, c.norm_eps);
  // Each query head's rotary part (after every head's nope part) rotated into q after its
  // absorbed part.
  const gpu::RopeTo q_rope{q, nh * hd, kl, hd};
  gpu::rope(st, qf, cs, sn, n, nh * kh, nh * nope, nh, rope, rope, gpu::RopeKind::kInterleaved,
            &q_rope);
  // The nope parts as rows [n n_head, nope] (one token's are already; more are gathered), each
  // moved into the compressed space by its head's wk_b: q[t, h, :kv_lora].
  gpu::Addr nope_rows = qf;
  if (n > 1) {
    gpu::copy_rows(st, qf, gathered, n, nh * nope, nh * kh, 0, nh * nope, 0);
    nope_rows = gathered;
  }
  per_head(g.wk_b, kl, nope_rows, q, hd);
  // The K rows stored with their rotary part rotated (at column kv_lora); attn_ [n n_head,
  // kv_lora]: each head's softmax-weighted sum of the K rows' first kv_lora values, the
  // compressed values, each expanded by its head's wv_b.
  const Rope k_rope{gpu::RopeKind::kInterleaved, rope, kl};
  attend(st, batch, step, cache, /*bidir_prefix=*/nullptr, l, &k_rope);
  per_head(g.wv_b, m.v_head, at(attn_), v, m.v_head);
  project(st, g.wo, v, gpu::Buffer(), g.attn_post_norm, x, n, l, &GpuLoraLayer::wo);
}

}  // namespace glm::model
