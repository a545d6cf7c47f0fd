// The MLP activations, one definition for the shaders that apply them (swiglu.comp, gelu.comp,
// and matmul.comp's fused inputs); macros, so that they take a float or a vec4.
// SILU_MUL(g, u) = silu(g) * u (model::ops::swiglu).
#define SILU_MUL(g, u) ((g) / (1.0 + exp(-(g))) * (u))
// GELU_TANH(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))) (model::ops::gelu_tanh), the
// tanh's argument clamped: some drivers compute tanh through exp(2u), which overflows to
// inf / inf = NaN for large |u|; tanh(+-15) is already +-1 in f32.
#define GELU_TANH(v) \
  (0.5 * (v) * (1.0 + tanh(clamp(0.7978845608028654 * ((v) + 0.044715 * (v) * (v) * (v)), -15.0, 15.0))))
