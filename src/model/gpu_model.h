// GpuModel: what the models on a Vulkan device share (GpuTransformer, transformer_gpu.h:
// ChatGLM2/3, GLM-4, llama; GpuChatGLM1, chatglm1_gpu.h: ChatGLM-6B), so that each keeps only
// its layers' ops:
// - the device, its name and its lost state (health());
// - the weights' upload in their GGUF block formats (Uploader) and the output head;
// - the KV cache in device memory, one buffer a GPU layer in model::KvPool's block layout
//   ([parts (K, V; K only for latent attention), n_blocks, block_tokens, row] of the pool's
//   type; the KvPool keeps the accounting
//   for the scheduler), and the Model calls that reach it: a fork's block copy, the KV disk
//   cache's save and load (the first n_cpu layers' rows stay in the pool's host memory);
// - a step's inputs (embedding rows, rotary tables, KV slots, output rows and block tables,
//   staged on the host and copied to the device at the start), the scratch activations, the
//   K/V store and attention of every sequence (with its P-Tuning v2 prefix, uploaded once per
//   adapter), the LM head and the read back of the outputs.
// A subclass's forward(): begin_step(), fill the embeddings and rotary tables, record(), its
// layers (with attend()), its final norm into rows_, finish_step().
// Ownership: keeps the GGUF file (for the embedding rows) and the device alive.
// Thread-safety: forward and the KV calls from one thread (the engine's). Cost: a step uploads
// T * (n_embd + 2 * rot_width + 1) + R + B words, reads back R * n_vocab floats.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "kernels/thread_pool.h"
#include "model/gpu_adapter_cache.h"
#include "model/gpu_plan.h"
#include "model/model.h"
#include "model/weights.h"

namespace glm::model {

class GpuModel : public Model {
 public:
  // Scratch widths of a subclass's step, per token.
  struct Widths {
    int rot = 0;        // rotary table floats (cos, and as many sin)
    int up = 0;         // up_
    int act = 0;        // act_ (0: none)
    int down_in = 0;    // the down projection's input (act_, or ChatGLM-6B's up_ after its GELU):
                        // the width of its 8-bit rows act_q8_ (0: none)
    int moe = 0;        // moe_: a mixture-of-experts layer's routing and slots (0: none)
    int mla = 0;        // mla_: latent attention's rows (transformer_gpu_mla.cc; 0: none)
    int mtp_in = 0;     // the step's MTP input rows (Step::mtp_in; 0: no MTP block)
    int out_extra = 0;  // more floats a read-back row (the MTP block's hidden rows)
  };

  const Config& config() const override { return config_; }
  void copy_kv_block(KvPool* kv, int src, int dst) override;
  void save_kv_block(const KvPool* kv, int block, uint8_t* data) const override;
  void load_kv_block(KvPool* kv, int block, const uint8_t* data) override;
  std::string device_name() const override;
  Status health() const override;
  int kv_host_layers() const override { return n_cpu_; }
  const GpuLayerPlan* gpu_plan() const override { return &plan_; }
  // A 2-token prompt (the few-token matmuls), a decode step after it (the one-token ones, with
  // 8-bit activations where the device takes them) and a prompt of the tiled matmuls' length:
  // the shaders of a conversation's first turn.
  std::vector<WarmUpStep> warm_up_steps() const override;
  // A pool of host_n_threads_, made on first use: the device runs the layers, so the host's
  // threads are the scheduler's alone (a subclass with CPU layers lends their pool instead).
  kernels::ThreadPool* host_threads() override;

  gpu::Device* device() { return device_.get(); }
  int gpu_layers() const { return config_.n_layer - n_cpu_; }

 protected:
  // Uploads weights to the device, reporting bytes done of `total` (GpuLayerPlan::weights) to
  // `progress`.
  struct Uploader {
    gpu::Device* device = nullptr;
    size_t total = 0, done = 0;
    ProgressFn progress;
    // The model file's mapping, which most weights lie in: read from the file (the others,
    // merged LoRA matrices, from memory).
    const MappedFile* file = nullptr;
    // A matrix (none if v.data is null); errors name `what`. experts: a stacked *_exps matrix
    // (gpu::upload_matrix's).
    Status matrix(const kernels::WeightView& v, gpu::Matrix* out, const std::string& what,
                  bool experts = false);
    // One matrix stacked from `views` (a fused QKV or gate-and-up matrix from separate ones, so
    // that one matmul computes them all) where each is present with the same type and row length
    // and together they fit one buffer (gpu::largest_buffer); else false, and nothing uploaded.
    // n_expert > 0: stacked *_exps matrices of n_expert experts, stacked expert by expert (expert
    // e's rows of each view in turn).
    StatusOr<bool> stacked(const std::vector<const kernels::WeightView*>& views, gpu::Matrix* out,
                           const std::string& what, int n_expert = 0);
    // v's rows in another order: the runs (first row, row count) of v one after the other
    // (GLM-4.7-Flash's wq_b regrouped: every head's nope rows, then every head's rope rows);
    // matrix() is its one run of every row.
    Status rows(const kernels::WeightView& v, const std::vector<std::pair<int64_t, int64_t>>& runs,
                gpu::Matrix* out, const std::string& what, bool experts = false);
    // *out = the uploaded m, `bytes` of the file's weights counted done; else m's error naming
    // `what`.
    Status took(StatusOr<gpu::Matrix> m, size_t bytes, gpu::Matrix* out, const std::string& what);
    // The vectors of `lens` floats each one after the other (zeros for a null one; none if all
    // are null): the biases of a stacked matrix.
    Status vecs(const std::vector<const float*>& v, const std::vector<int64_t>& lens,
                gpu::Buffer* out);
    // n floats (none if v is null).
    Status vec(const float* v, int64_t n, gpu::Buffer* out);
  };
  // The device's share of a model about to be uploaded (gpu_plan.h): each layer's matrices and
  // K/V (options.kv_bytes), the output head and the scratch of the largest step (reserve()'s
  // buffers for options.step_tokens), against the device's budget less what another model of
  // this process was promised (options.device_reserved*). `requested` as plan_gpu_layers's.
  // A plan with layers on the GPU is said in the log (unless `quiet`: a plan tried, not kept).
  // Errors: out_of_memory naming both sizes.
  static StatusOr<GpuLayerPlan> plan(const gpu::Device& device, const Config& config,
                                     const Weights& weights, Widths widths,
                                     const LoadOptions& options, int requested, bool quiet = false);

  // The step's inputs in in_host_ (and in_dev_, its device copy, whose x part is the residual
  // stream, updated in place by the layers): byte offsets of
  // [x: T * n_embd f32 | cos: T * rot_width | sin: T * rot_width | slots: T i32 |
  //  out rows: R i32 | block tables: B i32], and the host pointers to fill x, cos and sin.
  // An MTP step (begin_step's `mtp`) has one more part after the block tables, 16-byte aligned:
  // mtp_in [T, widths.mtp_in] (the block's input rows, filled by the subclass: mi).
  struct Step {
    int n = 0, n_out = 0, n_table = 0;
    size_t x = 0, cos = 0, sin = 0, slots = 0, rows = 0, table = 0, mtp_in = 0, bytes = 0;
    float* xs = nullptr;          // [T, n_embd]
    float* cs = nullptr;          // [T, rot_width]
    float* sn = nullptr;          // [T, rot_width]
    float* mi = nullptr;          // [T, widths.mtp_in] (an MTP step)
    int32_t* out_rows = nullptr;  // [n_out] the output rows (a subclass may keep fewer)
  };
  // A layer's device KV cache as attend() reads it: the buffer (K rows at 0, V rows at v_base;
  // v_base 0 where the K rows are the values: KvPool::parts 1) and its pool's shape.
  struct CacheRef {
    gpu::Addr kv = 0;
    uint32_t v_base = 0;
    uint32_t row_bytes = 0;
    int block_tokens = 0;
    DType type = DType::kF16;
    int parts = 2;  // KvPool::parts: 1 where the K rows are the values (no V rows to store)
  };
  // Layers [0, n_layer - plan.n_gpu) stay on the CPU.
  GpuModel(std::shared_ptr<const gguf::File> file, Config config,
           const kernels::WeightView& token_embd, std::unique_ptr<gpu::Device> device,
           const GpuLayerPlan& plan, Widths widths);

  // unsupported where the GPU attention cannot take the model's heads (wider than
  // gpu::kAttentionMaxHeadDim).
  static Status check_head_dim(const Config& config);
  // The device bytes of reserve()'s buffers for n tokens, r output rows and b block-table
  // entries (the host-visible ones too: they may come from the same heap).
  static size_t scratch_bytes(const Config& config, Widths widths, int n, int r, int b);

  // The device address of byte `byte_offset` of b (0 for an empty buffer: no bias, for
  // gpu::MatmulOut).
  static gpu::Addr at(const gpu::Buffer& b, size_t byte_offset = 0) {
    return b.address() + byte_offset;
  }
  // Uploads the final norm (and its bias where present) and the output matrix.
  Status upload_head(const Weights& w, Uploader* up);
  // Binds the device cache to `kv`, grows the scratch for the batch, lays out the step's inputs
  // and fills the slots, output rows and block tables (and seq_first_row_, seq_table_at_).
  // mtp: a step of the MTP block, whose pool `kv` (one layer) binds to its own cache
  // (mtp_cache()), not the trunk's; its layout has the mtp_in part.
  Status begin_step(const std::vector<SeqInput>& batch, KvPool* kv, Step* step, bool mtp = false);
  // The embedding row of `token` into dst [n_embd].
  void embed(int32_t token, float* dst) const;
  // Begins the step's command buffer with the copy of its inputs to the device.
  gpu::Stream& record(const Step& step);
  // Stores the K/V rows of qkv_ ([T, q_dim + 2 kv_dim]: q heads, k heads, v heads, rotated)
  // into the cache of GPU layer `l` and runs each sequence's attention into attn_ [T, q_dim].
  // Latent attention (Config::is_mla) lays qkv_ out as the absorbed q rows [T, q_dim], then the
  // K rows [T, kv_dim] (the values: no V rows), and stores the K rows only.
  // bidir_prefix: per sequence (kernels::AttentionShape's), or null for causal.
  // A sequence with a P-Tuning v2 prefix (SeqInput::adapter) attends GPU layer l's prefix
  // keys first (uploaded by begin_step); prefix_layer -1: none (the MTP block).
  // With `rope`, qkv_'s q and k heads are not rotated yet: the store rotates them with the
  // step's tables (gpu::KvStoreArgs::n_rot), one dispatch for both; latent attention's K rows
  // only (its queries come rotated), over their dims col .. col + n_rot - 1. Latent attention's
  // attn_ rows are [T, n_head kv_lora] (each head's values: gpu::AttentionArgs::v_dims). With
  // out_q8 (attn_input's), attn_'s rows are also written as 8-bit blocks there.
  struct Rope {
    gpu::RopeKind kind;
    int n_rot;
    int col = 0;
  };
  void attend(gpu::Stream& st, const std::vector<SeqInput>& batch, const Step& step, int l,
              const int* bidir_prefix, gpu::Addr out_q8 = 0) {
    attend(st, batch, step, layer_cache(l), bidir_prefix, l, nullptr, out_q8);
  }
  void attend(gpu::Stream& st, const std::vector<SeqInput>& batch, const Step& step,
              const CacheRef& cache, const int* bidir_prefix, int prefix_layer,
              const Rope* rope = nullptr, gpu::Addr out_q8 = 0);
  // attn_ [n, q_dim] as the input of `next`, the matrix that multiplies it after attend():
  // with 8-bit rows (attn_q8_) where next takes them and a head's dims are whole 32-value
  // blocks, which attend() then writes (no quantizing dispatch of the matmul's own).
  gpu::MatmulInput attn_input(const gpu::Matrix& next, int n) const;
  // GPU layer l's cache; the MTP block's (bound by the last MTP begin_step).
  CacheRef layer_cache(int l) const;
  CacheRef mtp_cache() const;
  // Makes room for n final-norm rows read back (hidden_host_: SeqInput::hidden_out).
  Status reserve_hidden(int n);
  // *b in device memory with room for `bytes` at least (grown, never shrunk).
  Status grow_device(gpu::Buffer* b, size_t bytes);
  // Grows *b on `dev` to hold `bytes` of `kind` (its contents are not kept).
  static Status grow(gpu::Device* dev, gpu::Buffer* b, size_t bytes, gpu::MemoryKind kind);
  // After the subclass put the final-norm rows in rows_ [R, n_embd]: the LM head (or the hidden
  // rows), the submission, and the outputs appended to *out. `head`: the output matrix (the
  // model's, or the MTP block's); with `rows_out` (kLogits only) rows_ too, appended to it.
  Status finish_step(gpu::Stream& st, const Step& step, OutputKind kind, std::vector<float>* out,
                     const gpu::Matrix* head = nullptr, std::vector<float>* rows_out = nullptr);

  std::shared_ptr<const gguf::File> file_;
  Config config_;
  kernels::WeightView token_embd_;  // read on the host: one row per token
  std::unique_ptr<gpu::Device> device_;
  GpuLayerPlan plan_;  // what was planned at load
  int n_cpu_ = 0;      // layers [0, n_cpu_) run on the CPU; their K/V in the KvPool's host memory
  Widths widths_;
  gpu::Buffer output_norm_;    // [n_embd]
  gpu::Buffer output_norm_b_;  // [n_embd] LayerNorm models, or empty
  gpu::Matrix output_;         // [n_vocab, n_embd]

  // Scratch on the device, [T, width] f32 rows, sized for cap_tokens_ / cap_rows_.
  gpu::Buffer cur_;         // [T, n_embd] normed input of a sub-block
  gpu::Buffer qkv_;         // [T, q_dim + 2 kv_dim]
  gpu::Buffer attn_;        // [T, q_dim]
  gpu::Buffer attn_split_;  // [gpu::attention_scratch_floats(head_dim)] a lone sequence's attention
                            // splits
  gpu::Buffer proj_;        // [T, n_embd]
  gpu::Buffer up_;          // [T, widths_.up]
  gpu::Buffer act_;         // [T, widths_.act]
  gpu::Buffer moe_;         // [T, widths_.moe] (transformer_gpu.cc lays it out)
  gpu::Buffer mla_;         // [T, widths_.mla] (transformer_gpu_mla.cc lays it out)
  // [T, n_head] int32: h, the head of each (token, head) row: latent attention's per-head
  // matrices are gpu::matmul_experts' experts (filled as it grows; latent attention only).
  gpu::Buffer mla_heads_;
  // cur_ and act_ rows as the integer-dot matmuls read them (gpu::quantize_q8's blocks), written
  // by the norm and SwiGLU beside their f32 rows for steps of up to kQ8Tokens tokens.
  static constexpr int kQ8Tokens = 16;
  gpu::Buffer cur_q8_;   // [min(T, kQ8Tokens), n_embd / 32] blocks
  gpu::Buffer act_q8_;   // [min(T, kQ8Tokens), widths_.down_in / 32] blocks
  gpu::Buffer attn_q8_;  // [min(T, kQ8Tokens), q_dim / 32] blocks; none unless head_dim % 32 == 0
  // at(buf) where the step's n tokens reach w through the integer-dot shaders and buf holds
  // them (n <= kQ8Tokens), else 0: the op then writes no 8-bit rows, and the matmul quantizes
  // its f32 rows itself if it needs them.
  gpu::Addr q8_rows(const gpu::Buffer& buf, const gpu::Matrix& w, int n) const;
  gpu::Buffer rows_;     // [R, n_embd] final-norm rows
  gpu::Buffer rows_q8_;  // [min(R, kQ8Tokens), n_embd / 32] rows_'s blocks for the LM head
  // rows_q8_ where the step's LM head (`head`, or output_) takes 8-bit rows of its n_out rows
  // (the final norm then writes them beside rows_), else 0 (kHidden: no head runs).
  gpu::Addr head_q8(const gpu::Matrix* head, int n_out, OutputKind kind) const;
  gpu::Buffer logits_;       // [R, n_vocab]
  gpu::Buffer in_dev_;       // the step's inputs (Step)
  gpu::Buffer hidden_host_;  // [T, n_embd] final-norm rows read back (SeqInput::hidden_out)

 private:
  // Scratch for n tokens, r output rows and b block-table entries (grow only).
  Status reserve(int n, int r, int b);
  // The device KV buffers for `kv` (made on first use, and again if the pool changes).
  Status bind_kv(const KvPool* kv);
  // Copies block `block` of every GPU layer between the device cache and block_io_ ([n_layer -
  // n_cpu_, 2, block_tokens, row]) in one submission: to the host, or from it.
  Status block_io(int block, bool to_host);

  // The MTP block's cache (one layer) for `kv`, made on first use and again if the pool changes.
  Status bind_mtp_kv(const KvPool* kv);
  // seq_prefix_ for the batch: each P-Tuning v2 prefix (model/adapter.h PrefixKv) on the device
  // in the cache's type, uploaded the first time a step has it (the eight most recently used
  // kept, by Adapter::id and KV type).
  Status prepare_prefixes(const std::vector<SeqInput>& batch);
  struct GpuPrefix {
    int n_tokens = 0;
    gpu::Buffer rows;  // [GPU layers, 2 (K, V), n_tokens, the cache's row]
  };
  GpuAdapterCache<GpuPrefix> prefixes_;       // by Adapter::id and the cache's type
  std::vector<const GpuPrefix*> seq_prefix_;  // [batch] this step's, or null

  // The device KV cache: one buffer a GPU layer.
  std::vector<gpu::Buffer> kv_;
  // The MTP block's: its pool's own (model::mtp_kv_config), beside the trunk's.
  gpu::Buffer mtp_kv_;
  // The pool (and its shape) a device cache was made for: made again when it changes.
  struct BoundKv {
    const KvPool* pool = nullptr;
    int n_blocks = 0, block_tokens = 0;
    int parts = 2;  // KvPool::parts: 2 (K, V), or 1 (K rows only)
    DType type = DType::kF16;
    size_t row_bytes = 0;
    bool is(const KvPool* kv) const;  // the same pool, blocks and type
    void bind(const KvPool* kv);
    uint32_t v_base() const;           // a layer's V rows start here in its buffer (K rows at 0;
                                       // 0 where they are the K rows)
    size_t block_bytes() const;        // a block's K (or V) rows of one layer
    CacheRef ref(gpu::Addr kv) const;  // a layer's buffer at `kv` as attend() reads it
  };
  BoundKv mtp_bound_;
  BoundKv kv_bound_;

  int cap_tokens_ = 0, cap_rows_ = 0, cap_blocks_ = 0;
  gpu::Buffer in_host_;                            // host-visible staging of in_dev_
  gpu::Buffer out_host_;                           // [R, max(n_vocab, n_embd)] f32 read back
  std::vector<int> seq_first_row_, seq_table_at_;  // [batch] begin_step()'s: no allocation
  gpu::Buffer block_io_;  // a block's GPU-layer K/V on its way to or from the disk cache
  // Test hook (docs/gpu.md#failures): GLMSERVE_VULKAN_FAIL_AT_STEP=N fails the N-th forward's
  // submission as a lost device would.
  int fail_at_step_ = 0;
  int steps_ = 0;
  std::unique_ptr<kernels::ThreadPool> host_pool_;  // host_threads()', once asked for

 protected:
  int host_n_threads_ = 0;  // LoadOptions::n_threads: host_threads()' size (0: physical cores)
};

}  // namespace glm::model
