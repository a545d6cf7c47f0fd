#version 450
// The routing of each token of a mixture-of-experts layer, the twin of model::route_token:
// score = sigmoid(logit), the k experts of the highest score + bias (ties: the lower id) in
// that order into ids, their unbiased scores (divided by their sum, clamped at f16's smallest
// normal, when norm is 1) times scale into weights.
//   logits: [n_tokens, n_expert]; bias: [n_expert] (unread when has_bias is 0);
//   ids: [n_tokens, k] int32; weights: [n_tokens, k] f32.
// One workgroup a token (workgroup y * groups_per_y + x); each pass finds one expert: every
// thread its best among its experts not chosen yet, then a tree over the workgroup.
#include "common.glsl"
#define KMAX 16
layout(local_size_x = 64) in;
layout(push_constant) uniform Push {
  Floats logits;
  Floats bias;
  Ints ids;
  Floats weights;
  uint n_tokens;
  uint n_expert;
  uint k;
  uint has_bias;
  uint norm;
  float scale;
  uint groups_per_y;
} p;

shared float best_v[64];
shared int best_e[64];
shared int chosen[KMAX];

float score(uint t, uint e) { return 1.0 / (1.0 + exp(-p.logits.v[t * p.n_expert + e])); }

// (ve, ee) ranks before (vb, eb): a higher selection value, or the same and a lower id; an
// empty candidate (id -1) never does.
bool before(float va, int ea, float vb, int eb) {
  if (ea < 0) return false;
  if (eb < 0) return true;
  return va > vb || (va == vb && ea < eb);
}

void main() {
  uint t = gl_WorkGroupID.y * p.groups_per_y + gl_WorkGroupID.x;
  if (t >= p.n_tokens) return;  // the whole workgroup
  uint tid = gl_LocalInvocationID.x;
  for (uint j = 0u; j < p.k; ++j) {
    float bv = 0.0;
    int be = -1;
    for (uint e = tid; e < p.n_expert; e += 64u) {
      bool taken = false;
      for (uint i = 0u; i < j; ++i) taken = taken || chosen[i] == int(e);
      if (taken) continue;
      float v = score(t, e) + (p.has_bias != 0u ? p.bias.v[e] : 0.0);
      if (before(v, int(e), bv, be)) {
        bv = v;
        be = int(e);
      }
    }
    best_v[tid] = bv;
    best_e[tid] = be;
    barrier();
    for (uint stride = 32u; stride > 0u; stride >>= 1) {
      if (tid < stride && before(best_v[tid + stride], best_e[tid + stride], best_v[tid],
                                 best_e[tid])) {
        best_v[tid] = best_v[tid + stride];
        best_e[tid] = best_e[tid + stride];
      }
      barrier();
    }
    if (tid == 0u) chosen[j] = best_e[0];
    barrier();
  }
  if (tid != 0u) return;
  // Each chosen score computed twice, not kept in an array: k is known only at run time, so the
  // array would live in memory (GpuShaders.NoPrivateArrayIsIndexedAtRunTime).
  float sum = 0.0;
  for (uint j = 0u; j < p.k; ++j) sum += score(t, uint(chosen[j]));
  for (uint j = 0u; j < p.k; ++j) {
    float v = score(t, uint(chosen[j]));
    if (p.norm != 0u) v /= max(sum, 6.103515625e-5);
    p.ids.v[t * p.k + j] = chosen[j];
    p.weights.v[t * p.k + j] = v * p.scale;
  }
}
