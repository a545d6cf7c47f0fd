// The one interface between the engine's scheduler and a language model: a batched forward pass
// over several sequences at different positions, each with its own KV block table.
// Implementations: Transformer (transformer.h, real GGUF models) and test fakes (scheduler tests).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/progress.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "model/adapter.h"
#include "model/config.h"
#include "model/gpu_plan.h"
#include "model/kv_pool.h"
#include "model/lora.h"

namespace glm::kernels {
class ThreadPool;
}  // namespace glm::kernels

namespace glm::model {

// One sequence's part of a batch. Its new tokens take positions n_past .. n_past + n_tokens - 1;
// `blocks` must cover all n_past + n_tokens positions (block i holds positions
// [i * block_tokens, (i + 1) * block_tokens)). Positions < n_past must already be in the cache.
struct SeqInput {
  const int32_t* tokens = nullptr;  // [n_tokens]
  int n_tokens = 0;
  int n_past = 0;
  const int32_t* blocks = nullptr;  // [n_blocks] block ids in the KvPool
  int n_blocks = 0;
  bool all_logits = false;  // false: logits of the last token only
  // ChatGLM-6B (v1) only: length of the sequence's prompt (its bidirectional prefix, ending in
  // [gMASK] <sop>); later tokens get 2D positions relative to it. 0 = the n_tokens of a step
  // with n_past == 0. Other architectures ignore it.
  int prefix_len = 0;
  // The fine-tuning applied to this sequence (model/adapter.h); null = the base model. Models
  // that cannot apply one fail forward() with unsupported.
  const Adapter* adapter = nullptr;
  // When set (MTP drafting, docs/engine.md#mtp-drafts; only for a model with has_mtp()): the
  // final-norm hidden row of each of its tokens, [n_tokens, n_embd], written here.
  float* hidden_out = nullptr;
};

// One sequence's part of a forward_mtp batch (docs/engine.md#mtp-drafts). Its tokens take
// positions seq.n_past .. of the MTP block's own K/V (seq.blocks: blocks of the MTP pool); token
// i is paired with hidden row i: the trunk's final-norm hidden row of the position before the
// token's, or, chained, the MTP block's own output row for it.
struct MtpInput {
  SeqInput seq;                   // no adapter
  const float* hidden = nullptr;  // [seq.n_tokens, n_embd]
  bool output = true;             // the last token's rows out; false: its K/V only (catch-up)
};

enum class OutputKind { kLogits, kHidden };

// A forward pass that warms a model up at load (warm_up()): n_tokens tokens of one sequence
// after its first n_past.
struct WarmUpStep {
  int n_past = 0;
  int n_tokens = 0;
};

// What a model needs from its scheduler, said by the model instead of special cases per
// architecture.
struct Capabilities {
  // The prompt is attended bidirectionally (ChatGLM-6B): it must be prefilled in one step, every
  // step of the sequence carries SeqInput::prefix_len, and the K/V of a prompt position depends
  // on the whole prompt, so nothing of it can be reused by another prompt (no prefix cache, no
  // conversation reuse: a longer prompt is a new prefix).
  bool bidirectional_prompt = false;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const Config& config() const = 0;
  virtual Capabilities capabilities() const { return {}; }
  // Runs the batch and appends its outputs to *out, in batch order: per sequence n_tokens rows
  // if all_logits else 1 row; a row is n_vocab logits (kLogits) or n_embd final-norm hidden
  // values (kHidden). Writes the new K/V rows into kv. Errors only for invalid input (token id
  // out of range, blocks not covering the positions); never partially writes *out on error.
  virtual Status forward(const std::vector<SeqInput>& batch, KvPool* kv, std::vector<float>* out,
                         OutputKind kind = OutputKind::kLogits) = 0;
  // Copies the K/V that forward() wrote into block src to block dst (a fork's copy-on-write
  // block). Models that keep their K/V in the pool need nothing else.
  virtual void copy_kv_block(KvPool* kv, int src, int dst) { kv->copy_block(src, dst); }
  // The K/V of one block as bytes, for the KV disk cache (docs/engine.md#kv-disk): its size,
  // and saving into / loading from `data` ([kv_block_bytes]). A loaded block reads back exactly
  // as the saved one did in forward().
  virtual size_t kv_block_bytes(const KvPool* kv) const { return kv->block_bytes(); }
  virtual void save_kv_block(const KvPool* kv, int block, uint8_t* data) const {
    kv->save_block(block, data);
  }
  virtual void load_kv_block(KvPool* kv, int block, const uint8_t* data) {
    kv->load_block(block, data);
  }
  // Bytes of weights copied into packed layouts at load (LoadOptions::repack); 0 if none.
  virtual size_t repacked_bytes() const { return 0; }
  // The leading layers whose K/V the model keeps in its KvPool's host memory (the pool's
  // host_layers); a model on a GPU keeps the others in device memory.
  virtual int kv_host_layers() const { return config().n_layer; }
  // Weight bytes a model on a GPU keeps in host memory for layers on the device (GLM-4.5's
  // router and routed experts under LoadOptions::cpu_moe); 0 elsewhere.
  virtual size_t host_expert_bytes() const { return 0; }
  // Ok while the model can run; the reason once it cannot any more (a lost GPU device: every
  // later forward() fails at once). The engine stops on it (docs/gpu.md#failures).
  virtual Status health() const { return Status::Ok(); }
  // Where the model runs, for logs, /health and the page: "cpu" or "vulkan:0 (NVIDIA H200)".
  virtual std::string device_name() const { return "cpu"; }
  // What this model planned on its GPU at load (weights, K/V, scratch); null on the CPU.
  virtual const GpuLayerPlan* gpu_plan() const { return nullptr; }
  // The threads the model runs its host work on (its CPU layers' kernels; --threads of them),
  // lent to the scheduler between steps for each sequence's choice of its token; null: the
  // caller's thread alone. Used only from the thread that calls forward(), never during it.
  virtual kernels::ThreadPool* host_threads() { return nullptr; }
  // The passes that warm the model up at load (warm_up()), in order: on the CPU one 2-token
  // prompt (it touches the weights); a model on a GPU compiles each shader on first use, so it
  // also takes a decode step and a prompt as long as the prefill shaders' (GpuModel).
  virtual std::vector<WarmUpStep> warm_up_steps() const { return {{0, 2}}; }
  // The model's own multi-token-prediction block (GLM-4.5's nextn; docs/engine.md#mtp-drafts):
  // whether it has one that forward_mtp runs (and forward() fills SeqInput::hidden_out).
  virtual bool has_mtp() const { return false; }
  // Runs the MTP block over the batch: appends, for each sequence with `output`, its last
  // token's n_vocab logits (the token after the next) to *logits and that row's head-normed
  // hidden [n_embd] (a chained step's input) to *hidden. Writes the K/V rows into kv, a pool of
  // ONE layer of this model's kv_dim. Errors as forward(); unsupported without the block.
  virtual Status forward_mtp(const std::vector<MtpInput>& batch, KvPool* kv,
                             std::vector<float>* logits, std::vector<float>* hidden) {
    (void)batch, (void)kv, (void)logits, (void)hidden;
    return unsupported("this model has no multi-token-prediction (MTP) block");
  }
};

// Runs m's warm_up_steps() on one sequence in kv's first blocks (their K/V is garbage after),
// so that the first request waits for nothing the load could do. Its prompts begin with
// `marks` (ChatGLM-6B's bidirectional prompt needs [gMASK] <sop>), the other tokens 0; a step
// whose tokens need more blocks than kv has is left out. Errors: the first failed forward's.
Status warm_up(Model* m, KvPool* kv, const std::vector<int32_t>& marks);

// LoadOptions::cpu_moe's "every layer", and "as few as make every layer fit".
inline constexpr int kAllLayers = 1 << 30;
inline constexpr int kCpuMoeAuto = -1;

struct LoadOptions {
  int n_threads = 0;  // 0 = physical cores
  // Repack the matrices that have a faster interleaved layout on this CPU (kernels/packed.h),
  // copy the others, into owned memory at load time, releasing their mapped pages. false =
  // compute straight from the mapping (faster start; slower kernels; pages the OS may reclaim).
  bool repack = true;
  // Weight bytes repacked or copied of the total, after each matrix (may be empty).
  ProgressFn progress;
  // Where the model runs (docs/gpu.md): "cpu"; "vulkan" (the first discrete GPU, else any
  // usable Vulkan device); "vulkan:N" (device N of `glmserve devices`); "auto" (the first
  // discrete GPU, else the CPU). Without a Vulkan loader or device, "auto" and "vulkan" run on
  // the CPU with one log line; "vulkan:N" that does not exist is an error.
  std::string device = "cpu";
  // Layers on the GPU, counted from the last as llama.cpp's -ngl; -1 = as many as fit in the
  // device's memory beside their KV cache (all when all fit), the rest on the CPU. N that does
  // not fit is refused with both sizes (model/gpu_plan.h).
  int gpu_layers = -1;
  // GLM-4.5's router and routed experts of the first cpu_moe layers (kAllLayers: every layer)
  // stay in host memory on a GPU, as llama.cpp's --n-cpu-moe: the device keeps those layers'
  // attention and shared expert, and the CPU's kernels route each token and run its chosen
  // experts on the rows read back mid-step (docs/gpu.md#memory). kCpuMoeAuto (with gpu_layers
  // -1): as few layers' as make every layer fit on the device, none when the model fits whole.
  // No effect on the CPU or on dense models.
  int cpu_moe = kCpuMoeAuto;
  // What the caller will ask of the model, for planning the device's memory: the KV pool's bytes
  // over all layers (model::KvPool::bytes_for; 0 = none planned), the most tokens one forward
  // call takes, and the bytes of the same device promised to another model of this process (a
  // draft's target: GpuLayerPlan::need()), of which device_reserved_unallocated (its K/V and
  // scratch) are not allocated yet: all a budget the driver reports does not already count.
  size_t kv_bytes = 0;
  int step_tokens = 512;
  // The bytes of the MTP block's own KV pool when --spec mtp will run it (0: not asked): a GPU
  // model then uploads the block (GLM-4.5's) and plans both; the CPU reads it from the file.
  size_t mtp_kv_bytes = 0;
  size_t device_reserved = 0;
  size_t device_reserved_unallocated = 0;
  // The device bytes of the adapters that will be served per request (LoRA pairs, P-Tuning
  // rows: model/gpu_adapter_cache.h adapters_device_bytes), planned beside the scratch.
  size_t adapter_bytes = 0;
  // LoRA adapters merged into the weights at load, in order (--lora A.gguf[:scale];
  // model/lora.h): no cost per token; quantized weights are re-quantized to their type.
  std::vector<LoraSpec> lora;
};

// Checks a --device value ("auto", "cpu", "vulkan", "vulkan:N"); invalid_argument naming the
// accepted forms otherwise.
Status validate_device(const std::string& device);
// N of a --device "vulkan:N" (validated); -1 for "vulkan" and "auto".
int device_index(const std::string& device);

// Loads any supported architecture from an opened GGUF file. With options.repack (the default)
// the weight matrices that have a packed layout for this CPU are copied into it (owned,
// huge-page memory; the copied rows' mapped pages are released); every other tensor is read
// from the file's mapping, which the model keeps alive through the shared_ptr.
// Errors: unknown architecture, missing or misshapen tensors, inconsistent metadata, a --lora
// that does not fit the model (named).
StatusOr<std::unique_ptr<Model>> load_model(std::shared_ptr<const gguf::File> file,
                                            const LoadOptions& options);

}  // namespace glm::model
