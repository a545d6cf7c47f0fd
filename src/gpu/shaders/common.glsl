// Shared by every shader: buffers are passed as device addresses in the push constants.
// Words: any buffer read as 32-bit words (quantized weights and KV rows are read byte-wise
// through it: GGUF blocks are only 2-byte aligned). Floats: f32 activations.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_scalar_block_layout : require
#extension GL_EXT_control_flow_attributes : require
// UNROLLED: a loop whose counter indexes a thread's array is unrolled, so that the array stays
// in registers (GpuShaders.NoPrivateArrayIsIndexedAtRunTime). ROLLED (the twin set that
// GPU-assisted validation runs: src/gpu/CMakeLists.txt) leaves every loop as written.
#ifdef ROLLED
#define UNROLLED
#else
#define UNROLLED [[unroll]]
#endif

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
// Vec4s: f32 activations read 16 bytes at a time (the address must be 16-byte aligned).
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vec4s { vec4 v[]; };
// Uvec4s: 16-bit weights read 16 bytes at a time (decode.glsl), a Words at a 16-byte aligned
// address seen through its address (GL_EXT_buffer_reference_uvec2).
#extension GL_EXT_buffer_reference_uvec2 : require
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Uvec4s { uvec4 v[]; };
bool aligned16(Words w, uint off) { return ((uvec2(w).x + off) & 15u) == 0u; }

// The 32 bits at byte offset `off` (a multiple of 2) of `w`.
uint u32_at(Words w, uint off) {
  uint i = off >> 2;
  if ((off & 3u) == 0u) return w.v[i];
  return (w.v[i] >> 16) | (w.v[i + 1u] << 16);
}
// The 16 bits at byte offset `off` (a multiple of 2).
uint u16_at(Words w, uint off) { return (w.v[off >> 2] >> ((off & 2u) * 8u)) & 0xFFFFu; }
uint u8_at(Words w, uint off) { return (w.v[off >> 2] >> ((off & 3u) * 8u)) & 0xFFu; }
float f16_at(Words w, uint off) { return unpackHalf2x16(u16_at(w, off)).x; }

// The integer code 0 <= c < 2^22, less `bias` (0 <= bias < 2^22), as a float, exactly: the float
// whose bits are those of 2^23 + c, less 2^23 + bias. No int-to-float conversion: NVIDIA's GPUs
// run those at 16 a clock per multiprocessor, an eighth of an add's rate (the CUDA programming
// guide's throughput table), and a quantized matmul would make one a value.
float code_f(uint c, float bias) { return uintBitsToFloat(0x4B000000u | c) - (8388608.0 + bias); }
// The signed byte b (0..255 as stored: a q8_0 cache's code, a Q6_K scale) as a float, by code_f:
// b with its sign bit flipped, less 128.
float s8_f(uint b) { return code_f(b ^ 0x80u, 128.0); }
// The integer v, -2^22 <= v < 2^22, as a float, exactly, by the same means: 1.5 x 2^23 + v.
float int_f(int v) { return intBitsToFloat(0x4B400000 + v) - 12582912.0; }
