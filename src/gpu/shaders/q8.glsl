// The 8-bit activations of the integer-dot matmuls (matmul.comp's IDOT): a block of 32 values as
// 32 signed 8-bit values and a scale, v ~ d * q with d = max |v| / 127 and q rounded to the
// nearest (ties to even): Q8_0's scheme (kernels/quant.cc) with an f32 scale. Written by
// quantize_q8.comp, and by the ops whose output a matmul reads next (rms_norm.comp,
// swiglu.comp) beside their f32 output; its reference is gpu_test.cc's (GpuQuantize).
// A block is 9 words: q (value e in byte e % 4 of word e / 4), then d.

// v, a value times 127 / its block's largest |value|, as its code: the nearest integer (ties to
// even) in [-127, 127], as a byte of two's complement. The float 1.5 * 2^23 + v has a unit in
// the last place of 1, so the add rounds v to an integer held in its low bits: no
// float-to-integer conversion, which NVIDIA's GPUs run at an eighth of an add's rate (16 a clock
// per multiprocessor), while a matmul that quantizes its input in its teams (matmul.comp's
// in_mode 1, 2) makes one a value of its row in every team. (Vulkan leaves an add's rounding to
// the driver; GPUs' and lavapipe's round to nearest even, and GpuQuantize checks it.)
uint q8_code(float v) { return floatBitsToUint(clamp(v, -127.0, 127.0) + 12582912.0) & 0xFFu; }

void store_q8_block(Words y, uint o, float v[32]) {
  float amax = 0.0;
  UNROLLED for (uint e = 0u; e < 32u; ++e) amax = max(amax, abs(v[e]));
  float id = amax > 0.0 ? 127.0 / amax : 0.0;
  UNROLLED for (uint k = 0u; k < 8u; ++k) {
    uint word = 0u;
    UNROLLED for (uint j = 0u; j < 4u; ++j) {
      word |= q8_code(v[4u * k + j] * id) << (8u * j);
    }
    y.v[o + k] = word;
  }
  y.v[o + 8u] = floatBitsToUint(amax / 127.0);
}
