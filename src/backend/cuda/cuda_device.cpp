// The cuda backend's device: the CUDA driver API, loaded from libcuda.so.1 at run time so
// that megamoe links and runs its CPU-side work on machines without a GPU driver.
#include <cuda.h>
#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "backend/backend.hpp"
#include "common/env.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {
namespace {

// The driver entry points megamoe uses. cuda.h maps some names to versioned symbols
// (cuMemAlloc -> cuMemAlloc_v2); MEGAMOE_SYMBOL expands those macros before quoting.
#define MEGAMOE_CU_FUNCTIONS(X)                                                            \
  X(cuInit) X(cuGetErrorString) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)      \
  X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuMemAlloc)      \
  X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8) X(cuModuleLoadData)            \
  X(cuModuleUnload) X(cuModuleGetFunction) X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuStreamCreate) \
  X(cuOccupancyMaxActiveClusters)                                                                \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy)              \
  X(cuEventRecord) X(cuEventElapsedTime) X(cuCtxSynchronize) X(cuFuncSetAttribute) X(cuStreamBeginCapture)     \
  X(cuMemcpyDtoDAsync) X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle) X(cuIpcCloseMemHandle)      \
  X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess)                                           \
  X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy) \
  X(cuStreamIsCapturing)

#define MEGAMOE_QUOTE(x) #x
#define MEGAMOE_SYMBOL(x) MEGAMOE_QUOTE(x)

struct Driver {
#define X(name) decltype(&::name) name = nullptr;
  MEGAMOE_CU_FUNCTIONS(X)
#undef X
  std::string load_error;  // empty when loaded
};

const Driver& driver() {
  static Driver d = [] {
    Driver d;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      d.load_error = fmt::format("no GPU driver found (libcuda.so.1 could not be loaded: {})", e ? e : "?");
      return d;
    }
#define X(name)                                                                  \
  d.name = reinterpret_cast<decltype(d.name)>(dlsym(lib, MEGAMOE_SYMBOL(name))); \
  if (!d.name && d.load_error.empty())                                           \
    d.load_error = fmt::format("GPU driver too old: libcuda.so.1 lacks {}", MEGAMOE_SYMBOL(name));
    MEGAMOE_CU_FUNCTIONS(X)
#undef X
    return d;
  }();
  return d;
}

std::string error_text(CUresult r) {
  const char* s = nullptr;
  if (driver().cuGetErrorString) driver().cuGetErrorString(r, &s);
  return fmt::format("{} ({})", s ? s : "unknown error", int(r));
}

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw DeviceError(fmt::format("megamoe: {} failed: {}", what, error_text(r)));
}

class CudaModule final : public Module {
 public:
  explicit CudaModule(CUmodule m) : m_(m) {}
  ~CudaModule() override { driver().cuModuleUnload(m_); }
  void* function(const std::string& symbol) override {
    CUfunction f = nullptr;
    CUresult r = driver().cuModuleGetFunction(&f, m_, symbol.c_str());
    if (r != CUDA_SUCCESS)
      throw DeviceError(fmt::format("megamoe: kernel {} not found in its module: {}", symbol, error_text(r)));
    return f;
  }
  void* handle() override { return m_; }

 private:
  CUmodule m_;
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    const Driver& d = driver();
    if (!d.load_error.empty()) throw NoGpuError("megamoe: " + d.load_error);
    CUresult r = d.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) throw NoGpuError("megamoe: no GPU found (the CUDA driver sees no device)");
    check(r, "cuInit");
    int count = 0;
    check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (count == 0) throw NoGpuError("megamoe: no GPU found (the CUDA driver sees no device)");
    if (ordinal < 0 || ordinal >= count)
      throw DeviceError(fmt::format("megamoe: GPU ordinal {} out of range (the driver sees {})", ordinal, count));
    check(d.cuDeviceGet(&dev_, ordinal), "cuDeviceGet");
    check(d.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
    char buf[256] = {};
    check(d.cuDeviceGetName(buf, sizeof buf, dev_), "cuDeviceGetName");
    name_ = buf;
    int major = 0, minor = 0;
    check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev_), "cuDeviceGetAttribute");
    check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev_), "cuDeviceGetAttribute");
    check(d.cuDeviceGetAttribute(&sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_), "cuDeviceGetAttribute");
    // Hopper's wgmma and setmaxnreg need the arch-specific target.
    arch_ = fmt::format("sm_{}{}{}", major, minor, major == 9 ? "a" : "");
    // Programmatic dependent launch is sm_90's; MEGAMOE_NO_PDL=1 turns it off, to measure what it gives.
    early_start_ = major >= 9 && !env_flag("MEGAMOE_NO_PDL");
  }

  BackendKind kind() const override { return BackendKind::cuda; }
  std::string name() const override { return name_; }
  std::string arch() const override { return arch_; }
  int multiprocessors() const override { return sms_; }
  int ordinal() const override { return ordinal_; }

  void* alloc(std::size_t bytes) override {
    current();
    CUdeviceptr p = 0;
    check(driver().cuMemAlloc(&p, bytes ? bytes : 1), "cuMemAlloc");
    return reinterpret_cast<void*>(p);
  }
  void free(void* ptr) override {
    current();
    driver().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));
  }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    current();
    check(driver().cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, bytes), "cuMemcpyHtoD");
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    current();
    check(driver().cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoH");
  }
  void fill_bytes(void* dst, unsigned char value, std::size_t bytes) override {
    current();
    check(driver().cuMemsetD8(reinterpret_cast<CUdeviceptr>(dst), value, bytes), "cuMemsetD8");
  }

  void copy_device_async(void* dst, const void* src, std::size_t bytes, StreamHandle s) override {
    current();
    check(driver().cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes,
                                     static_cast<CUstream>(s)),
          "cuMemcpyDtoDAsync");
  }

  std::unique_ptr<Module> load_module(std::string_view binary) override {
    current();
    CUmodule m = nullptr;
    check(driver().cuModuleLoadData(&m, binary.data()), "cuModuleLoadData");
    return std::make_unique<CudaModule>(m);
  }
  // A kernel's dynamic shared memory above 48 KB must be opted into before a launch or an
  // occupancy query.
  void allow_shared(CUfunction f, std::size_t shared_bytes) {
    if (shared_bytes > 48 * 1024)
      check(driver().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(shared_bytes)),
            "cuFuncSetAttribute");
  }
  void launch(void* function, Dim3 grid, Dim3 block, std::size_t shared_bytes, StreamHandle stream,
              void** args, bool early_start) override {
    current();
    auto f = static_cast<CUfunction>(function);
    allow_shared(f, shared_bytes);
    if (!early_start || !early_start_) {
      check(driver().cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, unsigned(shared_bytes),
                                    static_cast<CUstream>(stream), args, nullptr),
            "cuLaunchKernel");
      return;
    }
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = grid.x, config.gridDimY = grid.y, config.gridDimZ = grid.z;
    config.blockDimX = block.x, config.blockDimY = block.y, config.blockDimZ = block.z;
    config.sharedMemBytes = unsigned(shared_bytes);
    config.hStream = static_cast<CUstream>(stream);
    config.attrs = &attr;
    config.numAttrs = 1;
    check(driver().cuLaunchKernelEx(&config, f, args, nullptr), "cuLaunchKernelEx");
  }

  int resident_blocks(void* function, Dim3 block, std::size_t shared_bytes, int cluster) override {
    current();
    auto f = static_cast<CUfunction>(function);
    allow_shared(f, shared_bytes);
    CUlaunchConfig config{};
    config.gridDimX = unsigned(cluster), config.gridDimY = 1, config.gridDimZ = 1;
    config.blockDimX = block.x, config.blockDimY = block.y, config.blockDimZ = block.z;
    config.sharedMemBytes = unsigned(shared_bytes);
    int clusters = 0;
    check(driver().cuOccupancyMaxActiveClusters(&clusters, f, &config), "cuOccupancyMaxActiveClusters");
    return clusters * cluster;
  }

  std::string ipc_handle(void* ptr) override {
    current();
    CUipcMemHandle h{};
    check(driver().cuIpcGetMemHandle(&h, reinterpret_cast<CUdeviceptr>(ptr)), "cuIpcGetMemHandle");
    return std::string(reinterpret_cast<const char*>(&h), sizeof h);
  }
  void* open_ipc_handle(const std::string& handle) override {
    current();
    if (handle.size() != sizeof(CUipcMemHandle))
      throw DeviceError(fmt::format("megamoe: an IPC handle of {} bytes, expected {} (another backend's?)",
                                    handle.size(), sizeof(CUipcMemHandle)));
    CUipcMemHandle h{};
    std::memcpy(&h, handle.data(), sizeof h);
    CUdeviceptr p = 0;
    check(driver().cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle");
    return reinterpret_cast<void*>(p);
  }
  void close_ipc_handle(void* mapped) override {
    current();
    driver().cuIpcCloseMemHandle(reinterpret_cast<CUdeviceptr>(mapped));
  }
  bool can_access_peer(const Device& peer) override {
    const auto& p = static_cast<const CudaDevice&>(peer);
    if (p.dev_ == dev_) return true;
    int can = 0;
    check(driver().cuDeviceCanAccessPeer(&can, dev_, p.dev_), "cuDeviceCanAccessPeer");
    return can != 0;
  }
  void enable_peer_access(const Device& peer) override {
    const auto& p = static_cast<const CudaDevice&>(peer);
    if (p.dev_ == dev_) return;
    current();
    const CUresult r = driver().cuCtxEnablePeerAccess(p.ctx_, 0);
    if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) check(r, "cuCtxEnablePeerAccess");
  }

  StreamHandle create_stream() override {
    current();
    CUstream s = nullptr;
    check(driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    return s;
  }
  void destroy_stream(StreamHandle s) override { driver().cuStreamDestroy(static_cast<CUstream>(s)); }
  void synchronize(StreamHandle s) override {
    current();
    check(s ? driver().cuStreamSynchronize(static_cast<CUstream>(s)) : driver().cuCtxSynchronize(),
          "synchronize");
  }
  EventHandle create_event() override {
    current();
    CUevent e = nullptr;
    check(driver().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    return e;
  }
  void destroy_event(EventHandle e) override { driver().cuEventDestroy(static_cast<CUevent>(e)); }
  void record(EventHandle e, StreamHandle s) override {
    check(driver().cuEventRecord(static_cast<CUevent>(e), static_cast<CUstream>(s)), "cuEventRecord");
  }
  float elapsed_ms(EventHandle a, EventHandle b) override {
    float ms = 0;
    check(driver().cuEventElapsedTime(&ms, static_cast<CUevent>(a), static_cast<CUevent>(b)), "cuEventElapsedTime");
    return ms;
  }

  void begin_capture(StreamHandle s) override {
    current();
    check(driver().cuStreamBeginCapture(static_cast<CUstream>(s), CU_STREAM_CAPTURE_MODE_RELAXED),
          "cuStreamBeginCapture");
  }
  bool capturing(StreamHandle s) override {
    current();
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    check(driver().cuStreamIsCapturing(static_cast<CUstream>(s), &status), "cuStreamIsCapturing");
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
  }
  GraphHandle end_capture(StreamHandle s) override {
    current();
    CUgraph graph = nullptr;
    check(driver().cuStreamEndCapture(static_cast<CUstream>(s), &graph), "cuStreamEndCapture");
    CUgraphExec exec = nullptr;
    CUresult r = driver().cuGraphInstantiate(&exec, graph, 0);
    driver().cuGraphDestroy(graph);
    check(r, "cuGraphInstantiate");
    return exec;
  }
  void launch_graph(GraphHandle g, StreamHandle s) override {
    current();
    check(driver().cuGraphLaunch(static_cast<CUgraphExec>(g), static_cast<CUstream>(s)), "cuGraphLaunch");
  }
  void destroy_graph(GraphHandle g) override { driver().cuGraphExecDestroy(static_cast<CUgraphExec>(g)); }

 private:
  // The driver's current context is per thread; make ours current before each call.
  void current() { check(driver().cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

 public:
  void make_current() override { current(); }

 private:

  int ordinal_ = 0;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::string name_, arch_;
  int sms_ = 0;
  bool early_start_ = false;
};

}  // namespace

std::unique_ptr<Device> open_cuda_device(int ordinal) { return std::make_unique<CudaDevice>(ordinal); }

}  // namespace megamoe
