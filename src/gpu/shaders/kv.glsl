// KV rows in the device cache, one variant per KV type (KV_F32, KV_F16, KV_Q8_0): element e of
// the row at byte offset `ro` (model::KvPool's row layout; Q8_0 rows are GGUF Q8_0 blocks).
float kv_elem(Words kv, uint ro, uint e) {
#if defined(KV_F32)
  return uintBitsToFloat(kv.v[(ro >> 2) + e]);
#elif defined(KV_F16)
  return f16_at(kv, ro + 2u * e);
#else
  uint b = ro + 34u * (e >> 5);
  return s8_f(u8_at(kv, b + 2u + (e & 31u))) * f16_at(kv, b);
#endif
}
