// A Vulkan compute device: instance and device selection, device memory (buffers addressed by
// their device address: the shaders take every buffer as a pointer in their push constants, so
// there are no descriptor sets), the compute pipelines of the embedded shaders (created on first
// use), and one command stream for recording and submitting a step (stream.cc).
//
// Requirements (checked at open, said by name when missing): Vulkan 1.2, a compute queue,
// bufferDeviceAddress, storageBuffer16BitAccess, subgroup arithmetic in compute shaders. What
// the device offers beyond that (fp16 arithmetic, 8-bit storage, subgroup size) is read here,
// in one place.
//
// Ownership: a Device owns its device, memory and pipelines (the VkInstance is the process's
// one, shared and kept: instance.h says why); Buffers and the Stream must not outlive it.
// Thread-safety: a Device and its Stream are used from one thread at a time (the engine loop);
// list_devices() and Device::open are thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/status.h"
#include "gpu/shaders.h"
#include "gpu/vulkan_api.h"

namespace glm::gpu {

struct DeviceInfo {
  int index = 0;              // in the order the loader enumerates physical devices
  std::string name;           // "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string type;           // "discrete", "integrated", "virtual", "cpu", "other"
  uint64_t memory_bytes = 0;  // the largest device-local heap (at most GLMSERVE_VULKAN_MEMORY_MB)
  // What this process may still allocate there: the driver's budget less the heap's use by this
  // process (VK_EXT_memory_budget: other programs' use counts), else memory_bytes. Read when the
  // device is described (at open): what glmserve plans its layers with (docs/gpu.md#memory).
  uint64_t budget_bytes = 0;
  bool budget_from_driver = false;  // budget_bytes is VK_EXT_memory_budget's
  // The largest buffer the driver allocates in one piece: maxMemoryAllocationSize, and
  // VK_KHR_maintenance4's maxBufferSize where offered (at most GLMSERVE_VULKAN_MAX_BUFFER_MB).
  // Device::alloc refuses a larger one by name; the layer plan keeps a layer with a larger matrix
  // on the CPU (gpu::largest_buffer adds the shaders' own limit). The largest value: no limit
  // said.
  uint64_t max_buffer_bytes = UINT64_MAX;
  uint32_t api_version = 0;  // VK_MAKE_API_VERSION
  uint32_t subgroup_size = 0;
  VkDriverId driver_id = static_cast<VkDriverId>(0);  // VK_DRIVER_ID_MESA_RADV, ...; 0: unknown
  bool fp16_arithmetic = false;                       // shaderFloat16
  bool storage8 = false;                              // storageBuffer8BitAccess
  // shaderIntegerDotProduct (VK_KHR_shader_integer_dot_product, enabled at open where offered)
  // with subgroup quad operations in subgroups of 4 or more (matmul.comp's IDOT quantizes its
  // input rows in quads), and whether the driver says its 4 x 8-bit packed mixed-signedness
  // form is accelerated (IDOT: the default where it is, docs/gpu.md).
  bool int_dot = false;
  bool int_dot_fast = false;
  // Tensor cores through VK_NV_cooperative_matrix (enabled at open where offered, with
  // shaderFloat16 and the Vulkan memory model): the driver multiplies 16 x 16 fp16 tiles into
  // f32 ones in a subgroup of 32 (matmul_coop.comp: the prefill's matmul, docs/gpu.md).
  // Whether glmserve uses them is Device::coop_verified's.
  bool coop_matrix = false;
  // computeFullSubgroups (VK_EXT_subgroup_size_control, enabled at open where offered) with the
  // largest subgroup dividing 64, every shader's workgroup width: the pipelines ask for full
  // subgroups, so a 64-wide workgroup is 64 / subgroup_size of them (a driver may otherwise run
  // partial ones; matmul.comp then reduces through shared memory).
  bool full_subgroups = false;
  // VK_KHR_pipeline_executable_properties (enabled at open where offered): the driver says what
  // it compiled a pipeline into (registers, spills, scratch, code size: Device::compile with
  // VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR, then pipeline_stats.h). Not in features().
  bool shader_statistics = false;
  std::string unusable;  // empty if glmserve can run on it; else which feature is missing

  // "fp16 int8-storage int8-dot coopmat subgroup=32(full)": the features in use, for `glmserve
  // devices` and logs (int8-dot(slow): offered, not accelerated; (full): full_subgroups).
  std::string features() const;
  std::string api_version_string() const;  // "1.3.230"
};

// The shaders' build a driver runs best, as its compiler says (`glmserve devices --shaders`,
// docs/gpu.md "Two builds of each shader"): rolled on Mesa's RADV, whose compiler unrolls the
// loops itself and spills the unrolled build's registers on RDNA3; unrolled elsewhere.
ShaderBuild default_shader_build(const DeviceInfo& info);

// Every Vulkan device the loader reports. Error (unavailable) when there is no loader or no
// instance can be made; an empty list when the loader has no device.
StatusOr<std::vector<DeviceInfo>> list_devices();

enum class MemoryKind {
  kDevice,    // device-local: weights, KV, activations
  kUpload,    // host-visible, coherent: written by the host each step
  kReadback,  // host-visible, coherent, cached where offered: read by the host
};

class Device;

enum class DeviceUse { kRun, kCompile };

// A pipeline's specialization (Device::pipeline): the shader's own defaults, or the value of
// its specialization constant 0, at most kMaxSpec.
inline constexpr int kShaderDefaults = -1;
inline constexpr int kMaxSpec = 2;

// A device address: a buffer's (Buffer::address()) plus a byte offset, so that a view into a
// larger buffer is an address. The shaders take their buffers as these (push constants).
using Addr = VkDeviceAddress;

// A buffer with its own memory and device address. Movable, not copyable; frees on destruction.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  bool valid() const { return buffer_ != VK_NULL_HANDLE; }
  size_t size() const { return size_; }
  VkBuffer handle() const { return buffer_; }
  Addr address() const { return address_; }
  // Host pointer of an upload or readback buffer (mapped for its lifetime); null for kDevice.
  void* mapped() const { return mapped_; }
  void reset();

 private:
  friend class Device;
  Device* device_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceAddress address_ = 0;
  size_t size_ = 0;
  void* mapped_ = nullptr;
};

// Records a step's dispatches and copies, then submits them and waits. Every dispatch is
// followed by a barrier (each op of a step reads what the one before wrote), unless the caller
// says otherwise (concurrent_with_last). A long step goes to the queue in parts as it is
// recorded (every Device::kSubmitEvery dispatches, or as set), so the device runs its first layers
// while the host records the rest; the barrier that opens each part orders it after the parts
// before.
class Stream {
 public:
  void begin();
  // Runs `shader` over groups (x, y, z) with `push` (at most 128 bytes) as its push constants.
  void dispatch(Shader shader, const void* push, size_t push_bytes, uint32_t gx, uint32_t gy = 1,
                uint32_t gz = 1) {
    dispatch(shader, kShaderDefaults, push, push_bytes, gx, gy, gz);
  }
  // The same on the pipeline of `shader` specialized by `spec` (Device::pipeline).
  void dispatch(Shader shader, int spec, const void* push, size_t push_bytes, uint32_t gx,
                uint32_t gy, uint32_t gz);
  void copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset,
            size_t bytes);
  // Drops the barrier before the next dispatch: the caller says it neither reads what the
  // dispatch before it wrote nor writes what that one reads (one op over parts of a batch, e.g.
  // each sequence's attention), so the two may run at once. The barrier before that one stays.
  void concurrent_with_last() { pending_barrier_ = false; }
  // A device-local buffer of at least `bytes` for one op's intermediate values (matmul's 8-bit
  // activations), the same one for every caller: valid until the next begin(); every dispatch
  // is ordered after the ones before it that may read it, as a barrier follows each op. 0 if
  // it cannot be allocated (the caller then takes a path without it).
  VkDeviceAddress scratch(size_t bytes);
  Device& device() { return *device_; }
  // Submits what was recorded and waits for it. Errors: unavailable, naming the Vulkan result
  // (a lost device, a timeout after the device's submit_timeout_ms), after which the device is
  // marked lost and every later submit fails at once.
  Status submit_and_wait();
  // The parts the step being (or last) recorded went to the queue in: 1 where it was whole.
  int parts() const { return static_cast<int>(part_) + 1; }

 private:
  friend class Device;
  void barrier();
  void mark(int op);  // the profile's timestamp after op (a Shader, or kShaderCount: a copy)
  void read_profile(double record_ms, double wait_ms);
  void start_part();   // begins recording cmds_[part_] (allocated the first time)
  void submit_part();  // submits the part recorded so far without waiting; opens the next
  // Ends cmd_ and submits it (signalling `fence`, if not null); counts it in submitted_.
  Status end_and_submit(VkFence fence);
  // Waits (up to the device's timeout) for every part submitted since begin(), on the fence of
  // the last part's submit where `fenced`, else on an empty submit's; the device is lost where
  // that fails.
  VkResult drain(bool fenced);
  Device* device_ = nullptr;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::vector<VkCommandBuffer> cmds_;  // a step's parts, reused step after step
  size_t part_ = 0;                    // the part being recorded: cmd_ == cmds_[part_]
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  int part_dispatches_ = 0;  // dispatches recorded into this part
  int submitted_ = 0;        // parts submitted since begin(), not yet waited for
  Status failed_;            // a part's submit that failed, returned by submit_and_wait
  bool recording_ = false;
  bool pending_barrier_ = false;
  std::chrono::steady_clock::time_point begun_;  // begin(), for the profile's host times
  double compile_ms_at_begin_ = 0;               // Device::compile_ms_ then
  std::vector<int> marks_;       // the op before each timestamp after the first, this step
  std::vector<Buffer> scratch_;  // the last is scratch(); those before it, outgrown this step
};

// The device time of each shader summed over the steps profiled (Device::enable_profile).
struct OpTime {
  std::string name;  // "matmul_q4_0", "copy" for buffer copies
  uint64_t calls = 0;
  double ms = 0;
};

class Device {
 public:
  // Opens device `index` of list_devices(), or with index < 0 the first discrete GPU, else the
  // first integrated or virtual one, else any usable one (lavapipe); with discrete_only, the
  // first discrete GPU or none (--device auto). Errors: unavailable (no loader, no device, the
  // index out of range, no discrete GPU) or unsupported (a required feature missing).
  // With DeviceUse::kCompile, the device compiles pipelines and runs nothing: no stream (its use
  // is a bug), for the drivers' statistics (pipeline_stats.h) on a driver with no queue to run
  // on (RADV's null device, RADV_FORCE_FAMILY).
  static StatusOr<std::unique_ptr<Device>> open(int index, bool discrete_only = false,
                                                DeviceUse use = DeviceUse::kRun);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  const VulkanApi& vk() const { return api_; }
  VkDevice handle() const { return device_; }
  VkInstance instance() const { return instance_; }  // the process's one (instance.h)

  // A buffer of `bytes` (rounded up to 16). Errors: out_of_memory naming the size.
  StatusOr<Buffer> alloc(size_t bytes, MemoryKind kind);
  // Copies host bytes into a device buffer at `offset`, waiting for the copy (upload.cc). They
  // go through two staging buffers in turn, a submission each time one is full: the host fills
  // one while the device copies the other out. Errors: unavailable (a lost device, a failed
  // submission, a copy that does not finish within submit_timeout_ms), after every copy
  // submitted has finished.
  Status upload(const void* data, size_t bytes, const Buffer& dst, size_t offset);
  // The same for host byte ranges written one after the other from `offset` (a matrix stacked
  // from several: gpu::upload_matrix's parts). A range of a model file's mapping names it
  // (`file`), and is then read from the file (MappedFile::copy_out).
  struct HostBytes {
    const void* data = nullptr;
    size_t bytes = 0;
    const MappedFile* file = nullptr;
  };
  Status upload(const std::vector<HostBytes>& parts, const Buffer& dst, size_t offset);
  // The bytes of each staging buffer (rounded up to 16, at most a buffer's largest):
  // kUploadChunk, or a few in tests, so that a small upload takes many turns.
  void set_upload_chunk(size_t bytes);
  static constexpr size_t kUploadChunk = size_t{32} << 20;
  // Copies device bytes back into host memory, waiting for the copy.
  Status download(const Buffer& src, size_t offset, size_t bytes, void* data);

  Stream& stream() { return stream_; }
  // The pipeline of `shader`, created on first use (the driver compiles the embedded SPIR-V;
  // one it rejects is a bug, and aborts). spec: the value of the shader's specialization
  // constant 0 (0 to kMaxSpec: matmul.comp's log2 of the rows a team takes, so that the
  // compiler drops the code and registers of the rows a team does not), each value a pipeline
  // of its own; kShaderDefaults: the shader's own defaults.
  VkPipeline pipeline(Shader shader, int spec = kShaderDefaults);
  // Creates the pipeline of `shader` now; unsupported (naming the driver's answer) where the
  // driver rejects it: for shaders of optional features (the tensor cores' check), tried once
  // before they are used.
  Status try_pipeline(Shader shader);
  // A new pipeline of `shader` with `flags`, as pipeline() would make it (this device's build,
  // full subgroups where offered), owned by the caller (vk().vkDestroyPipeline). Only shaders
  // whose features the device has (runs()).
  VkResult compile(Shader shader, VkPipelineCreateFlags flags, VkPipeline* out,
                   int spec = kShaderDefaults);
  // Whether the device has what `shader` needs beyond the required features: integer dot
  // products for the 8-bit-activation matmuls, tensor cores for the cooperative-matrix ones,
  // fp16 arithmetic for their scalar twins.
  bool runs(Shader shader) const;
  // Pipelines every device of the process has created so far (a test sees what compiles when).
  static uint64_t pipelines_created();
  VkPipelineLayout layout() const { return layout_; }

  // Test hook (docs/gpu.md#failures): the n-th submit from now (1 = the next) fails as a lost
  // device would. 0 disarms it.
  void inject_failure_after(int n_submits) { fail_after_ = n_submits; }
  bool lost() const { return lost_; }

  // Whether the tensor-core matmul gave the reference's products here (matmul.h's
  // check_coop_matmul sets it, once, where info().coop_matrix); until then, and where it did
  // not, the prefill takes the shaders without tensor cores.
  bool coop_verified() const { return coop_verified_; }
  void set_coop_verified(bool ok) { coop_verified_ = ok; }

  // Op timing (GLMSERVE_VULKAN_PROFILE=1 at open, or this call): a timestamp after every
  // dispatch and copy of a step, the time between two summed by shader. False where the queue
  // writes no timestamps. The report is logged when the device closes.
  bool enable_profile();
  std::vector<OpTime> profile() const;  // largest time first
  // "vulkan profile (NAME): 12 steps, 3.4 ms on the device" with the host's time recording
  // them and waiting for them, and a line per shader.
  std::string profile_report() const;
  // How long a submit may run before the device is taken as hung (default 120 s;
  // GLMSERVE_VULKAN_TIMEOUT_MS overrides).
  uint64_t submit_timeout_ms() const { return timeout_ms_; }
  // The dispatches a step's part holds before the stream submits it and records on (default
  // kSubmitEvery; GLMSERVE_VULKAN_SUBMIT overrides, 0: a step is one submission).
  void set_submit_every(int n) { submit_every_ = n; }
  static constexpr int kSubmitEvery = 48;
  // Which build of the shaders the pipelines take (shaders.h): rolled under the validation
  // layer (GLMSERVE_VULKAN_VALIDATION); else as GLMSERVE_VULKAN_ROLLED says ("1": rolled, "0":
  // unrolled: to measure the two against each other); else the driver's
  // (default_shader_build). Read at open.
  ShaderBuild shader_build() const { return shader_build_; }

 private:
  friend class Buffer;
  friend class Stream;
  Device() = default;
  Status init(VkPhysicalDevice physical, const DeviceInfo& info, DeviceUse use);
  int find_memory_type(uint32_t type_bits, MemoryKind kind) const;
  Status check_submit();  // the failure hook and the lost state, before a submit
  // How a command buffer (the stream's parts, the uploads' copies) reaches the queue:
  void begin_commands(VkCommandBuffer cmd);  // reset (none pending) and begun for one submit
  // Ends cmd and submits it, signalling `fence` if not null. Errors: check_submit's, the
  // driver's (a lost device marks it lost).
  Status end_and_submit(VkCommandBuffer cmd, VkFence fence);
  // Waits for `fence` (up to timeout_ms_) and resets it; a failure marks the device lost.
  VkResult wait_fence(VkFence fence);
  // "the GPU (NAME) did not finish WHAT: RESULT[ after N ms]": a wait that failed.
  Status unfinished(const std::string& what, VkResult r) const;
  // A staging buffer of the uploads (upload.cc), with the command buffer that copies it out and
  // the fence of that copy.
  struct Staging {
    Buffer buf;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    bool pending = false;  // its copy submitted, not yet waited for
  };
  Status make_staging();  // staging_'s buffers, command buffers and fences, once
  // Submits the copy of s.buf's first `bytes` to dst at `offset`.
  Status copy_staged(Staging& s, size_t bytes, const Buffer& dst, size_t offset);
  Status wait_staged(Staging& s);  // for its pending copy, if any; a failure loses the device
  VkResult create_pipeline(Shader shader, int spec);  // into pipelines_, unless there already

  VulkanApi api_;
  DeviceInfo info_;
  VkInstance instance_ = VK_NULL_HANDLE;  // the process's (not destroyed with the Device)
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkPhysicalDeviceMemoryProperties memory_{};
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  std::vector<VkPipeline> pipelines_;  // [kShaderCount][kMaxSpec + 2] (spec + 1), made lazily
  Stream stream_;
  std::array<Staging, 2> staging_;
  size_t upload_chunk_ = kUploadChunk;
  VkQueryPool query_pool_ = VK_NULL_HANDLE;  // timestamps, when profiling
  uint64_t timestamp_mask_ = 0;              // the queue's valid timestamp bits
  double timestamp_ns_ = 0;                  // nanoseconds per timestamp tick
  std::vector<OpTime> profile_;              // [kShaderCount + 1]: the shaders, then copies
  uint64_t profiled_steps_ = 0;
  double record_ms_ = 0;   // the profiled steps' host time from begin() to their submit
  double wait_ms_ = 0;     // and from their submit to the fence
  double compile_ms_ = 0;  // creating pipelines (the driver compiles them), since the open
  int fail_after_ = 0;
  bool lost_ = false;
  bool coop_verified_ = false;
  uint64_t timeout_ms_ = 120000;
  int submit_every_ = kSubmitEvery;
  ShaderBuild shader_build_ = ShaderBuild::kUnrolled;
};

}  // namespace glm::gpu
