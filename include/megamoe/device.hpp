// A GPU as megamoe uses it: memory, modules, launches, streams and events. One interface,
// implemented by the `cuda` backend (CUDA driver API) and the `hip` backend (HIP runtime);
// each loads its driver library at run time, so nothing here needs a GPU to link.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace megamoe {

enum class BackendKind { cuda, hip };
std::string_view to_string(BackendKind kind);
BackendKind backend_from_name(std::string_view name);  // "cuda" or "hip"

using StreamHandle = void*;  // CUstream / hipStream_t; nullptr is the default stream
using EventHandle = void*;   // CUevent / hipEvent_t
using GraphHandle = void*;   // an instantiated graph: CUgraphExec / hipGraphExec_t

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

class Module {
 public:
  virtual ~Module() = default;
  // A kernel's handle by symbol; throws DeviceError naming the symbol if absent.
  virtual void* function(const std::string& symbol) = 0;
  // The backend's own handle of the module (CUmodule), for libraries that set state in it (NVSHMEM).
  virtual void* handle() { return nullptr; }
};

class Device {
 public:
  virtual ~Device() = default;
  virtual BackendKind kind() const = 0;
  virtual std::string name() const = 0;
  virtual std::string arch() const = 0;  // compile target for this device, e.g. "sm_90a"
  virtual int multiprocessors() const = 0;
  virtual int ordinal() const = 0;  // the GPU's index in its backend

  virtual void* alloc(std::size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  virtual void copy_to_device(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void fill_bytes(void* dst, unsigned char value, std::size_t bytes) = 0;
  virtual void copy_device_async(void* dst, const void* src, std::size_t bytes, StreamHandle stream) = 0;

  virtual std::unique_ptr<Module> load_module(std::string_view binary) = 0;
  // early_start: the kernel may be scheduled before the stream's previous kernel has finished
  // (programmatic dependent launch on NVIDIA sm_90 and later; elsewhere an ordinary launch). Such
  // a kernel calls mm_wait_prior_grid() (templates/prelude) before it touches what that kernel
  // reads or writes.
  virtual void launch(void* function, Dim3 grid, Dim3 block, std::size_t shared_bytes,
                      StreamHandle stream, void** args, bool early_start = false) = 0;
  // How many blocks of `function` (launched in clusters of `cluster`, as it was compiled) can be
  // resident at once on the whole device; 0 where the backend cannot say.
  virtual int resident_blocks(void* function, Dim3 block, std::size_t shared_bytes, int cluster) {
    (void)function, (void)block, (void)shared_bytes, (void)cluster;
    return 0;
  }

  // Memory of another process (expert parallelism over processes): a handle to memory this
  // device allocated, which another process opens on its own device; open_ipc_handle maps it
  // (close_ipc_handle unmaps). Memory of another device of this process: enable_peer_access lets
  // this device's kernels read and write `peer`'s memory at its own addresses.
  virtual std::string ipc_handle(void* ptr) = 0;
  virtual void* open_ipc_handle(const std::string& handle) = 0;
  virtual void close_ipc_handle(void* mapped) = 0;
  virtual bool can_access_peer(const Device& peer) = 0;
  virtual void enable_peer_access(const Device& peer) = 0;

  // Makes this device's context the calling thread's (for a library that starts on the current
  // context: NVSHMEM).
  virtual void make_current() {}

  virtual StreamHandle create_stream() = 0;
  virtual void destroy_stream(StreamHandle stream) = 0;
  virtual void synchronize(StreamHandle stream) = 0;
  virtual EventHandle create_event() = 0;
  virtual void destroy_event(EventHandle event) = 0;
  virtual void record(EventHandle event, StreamHandle stream) = 0;
  virtual float elapsed_ms(EventHandle start, EventHandle stop) = 0;

  // Graphs: what is launched on `stream` between begin_capture and end_capture becomes one
  // executable graph (the stream must not be the default stream).
  virtual void begin_capture(StreamHandle stream) = 0;
  virtual bool capturing(StreamHandle stream) = 0;  // whether `stream` is being captured now
  virtual GraphHandle end_capture(StreamHandle stream) = 0;
  virtual void launch_graph(GraphHandle graph, StreamHandle stream) = 0;
  virtual void destroy_graph(GraphHandle graph) = 0;
};

// Opens GPU `ordinal` of a backend. Throws NoGpuError ("no GPU driver found" / "no GPU found")
// where there is none, DeviceError on any other driver failure.
std::unique_ptr<Device> open_device(BackendKind kind, int ordinal = 0);

// True when open_device(kind, 0) would succeed; `why` gets the reason when not.
bool gpu_available(BackendKind kind, std::string* why = nullptr);

// Device memory owned by a Device; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device& device, std::size_t bytes) : device_(&device), bytes_(bytes), ptr_(device.alloc(bytes)) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(device_, o.device_), std::swap(bytes_, o.bytes_), std::swap(ptr_, o.ptr_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_) device_->free(ptr_);
  }
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  Device* device_ = nullptr;
  std::size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

}  // namespace megamoe
