// The sum over a workgroup of up to 64 subgroups (rms_norm.comp: 256 threads, subgroups of 4 or
// more; layer_norm.comp: 64): a subgroup add, then the subgroups' sums from shared memory, in order.
// Needs GL_KHR_shader_subgroup_arithmetic.
shared float group_part[64];  // a sum a subgroup

// The sum of every thread's `v` (all threads call it; it may be called again).
float group_sum(float v) {
  float sg = subgroupAdd(v);
  if (subgroupElect()) group_part[gl_SubgroupID] = sg;
  barrier();
  float s = 0.0;
  for (uint g = 0u; g < gl_NumSubgroups; ++g) s += group_part[g];
  barrier();  // group_part is written again by the next call
  return s;
}
