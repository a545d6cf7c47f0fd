#version 450
// Groups a step's slots by expert for the tiled experts' matmul (matmul_tiled.comp's IDS):
// counts[e] = how many slots chose expert e, and slots[e * cap ..] those slots (in no set
// order: each is one row of the products, computed alone).
//   ids: [n_slots] int32 (moe_route.comp's, a token's k slots in a row); counts: [n_expert];
//   slots: [n_expert, cap] int32 (cap: at least the most slots one expert can get, the token
//   count: a token chooses an expert once).
// One workgroup: counters in shared memory (n_expert <= MAX_EXPERTS).
#include "common.glsl"
#define MAX_EXPERTS 4096
layout(local_size_x = 256) in;
layout(push_constant) uniform Push {
  Ints ids;
  Ints counts;
  Ints slots;
  uint n_slots;
  uint n_expert;
  uint cap;
} p;

shared uint count[MAX_EXPERTS];

void main() {
  uint tid = gl_LocalInvocationID.x;
  for (uint e = tid; e < p.n_expert; e += 256u) count[e] = 0u;
  barrier();
  for (uint s = tid; s < p.n_slots; s += 256u) {
    uint e = uint(p.ids.v[s]);
    uint at = atomicAdd(count[e], 1u);
    p.slots.v[e * p.cap + at] = int(s);
  }
  barrier();
  for (uint e = tid; e < p.n_expert; e += 256u) p.counts.v[e] = int(count[e]);
}
