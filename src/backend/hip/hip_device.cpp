// The hip backend's device: the HIP runtime from the dlopen'ed libamdhip64. Built and
// compile-checked here; not run in this project's CI (no AMD GPU there; README.md says so).
#include <cstring>

#include <fmt/format.h>

#include "backend/backend.hpp"
#include "backend/hip/hip_library.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {
namespace {

const hip::Library& lib() { return hip::loaded_library(); }

void check(hipError_t r, const char* what) {
  if (r != hipSuccess)
    throw DeviceError(fmt::format("megamoe: {} failed: {} ({})", what, lib().hipGetErrorString(r), int(r)));
}

class HipModule final : public Module {
 public:
  explicit HipModule(hipModule_t m) : m_(m) {}
  ~HipModule() override { (void)lib().hipModuleUnload(m_); }
  void* function(const std::string& symbol) override {
    hipFunction_t f = nullptr;
    if (lib().hipModuleGetFunction(&f, m_, symbol.c_str()) != hipSuccess)
      throw DeviceError(fmt::format("megamoe: kernel {} not found in its module", symbol));
    return f;
  }

 private:
  hipModule_t m_;
};

class HipDevice final : public Device {
 public:
  explicit HipDevice(int ordinal) : ordinal_(ordinal) {
    const hip::Library& l = lib();
    hipError_t r = l.hipInit(0);
    int count = 0;
    if (r != hipSuccess || l.hipGetDeviceCount(&count) != hipSuccess || count == 0)
      throw NoGpuError("megamoe: no GPU found (the HIP runtime sees no device)");
    if (ordinal < 0 || ordinal >= count)
      throw DeviceError(fmt::format("megamoe: GPU ordinal {} out of range (the runtime sees {})", ordinal, count));
    current();
    hipDeviceProp_t p{};
    check(l.hipGetDeviceProperties(&p, ordinal), "hipGetDeviceProperties");
    name_ = p.name;
    arch_ = std::string(p.gcnArchName).substr(0, std::string(p.gcnArchName).find(':'));
    sms_ = p.multiProcessorCount;
  }

  BackendKind kind() const override { return BackendKind::hip; }
  std::string name() const override { return name_; }
  std::string arch() const override { return arch_; }
  int multiprocessors() const override { return sms_; }
  int ordinal() const override { return ordinal_; }

  void* alloc(std::size_t bytes) override {
    current();
    void* p = nullptr;
    check(lib().hipMalloc(&p, bytes ? bytes : 1), "hipMalloc");
    return p;
  }
  void free(void* p) override { (void)lib().hipFree(p); }
  void copy_to_device(void* dst, const void* src, std::size_t n) override {
    current();
    check(lib().hipMemcpyHtoD(dst, const_cast<void*>(src), n), "hipMemcpyHtoD");
  }
  void copy_to_host(void* dst, const void* src, std::size_t n) override {
    current();
    check(lib().hipMemcpyDtoH(dst, const_cast<void*>(src), n), "hipMemcpyDtoH");
  }
  void fill_bytes(void* dst, unsigned char v, std::size_t n) override {
    current();
    check(lib().hipMemsetD8(dst, v, n), "hipMemsetD8");
  }
  void copy_device_async(void* dst, const void* src, std::size_t n, StreamHandle s) override {
    current();
    check(lib().hipMemcpyDtoDAsync(dst, const_cast<void*>(src), n, static_cast<hipStream_t>(s)), "hipMemcpyDtoDAsync");
  }
  std::unique_ptr<Module> load_module(std::string_view binary) override {
    current();
    hipModule_t m = nullptr;
    check(lib().hipModuleLoadData(&m, binary.data()), "hipModuleLoadData");
    return std::make_unique<HipModule>(m);
  }
  void launch(void* f, Dim3 g, Dim3 b, std::size_t shared, StreamHandle s, void** args, bool /*early_start*/) override {
    // HIP has no programmatic dependent launch: an ordinary, serialised launch.
    current();
    check(lib().hipModuleLaunchKernel(static_cast<hipFunction_t>(f), g.x, g.y, g.z, b.x, b.y, b.z,
                                      unsigned(shared), static_cast<hipStream_t>(s), args, nullptr),
          "hipModuleLaunchKernel");
  }
  std::string ipc_handle(void* ptr) override {
    current();
    hipIpcMemHandle_t h{};
    check(lib().hipIpcGetMemHandle(&h, ptr), "hipIpcGetMemHandle");
    return std::string(reinterpret_cast<const char*>(&h), sizeof h);
  }
  void* open_ipc_handle(const std::string& handle) override {
    current();
    if (handle.size() != sizeof(hipIpcMemHandle_t))
      throw DeviceError(fmt::format("megamoe: an IPC handle of {} bytes, expected {} (another backend's?)",
                                    handle.size(), sizeof(hipIpcMemHandle_t)));
    hipIpcMemHandle_t h{};
    std::memcpy(&h, handle.data(), sizeof h);
    void* p = nullptr;
    check(lib().hipIpcOpenMemHandle(&p, h, hipIpcMemLazyEnablePeerAccess), "hipIpcOpenMemHandle");
    return p;
  }
  void close_ipc_handle(void* mapped) override {
    current();
    (void)lib().hipIpcCloseMemHandle(mapped);
  }
  bool can_access_peer(const Device& peer) override {
    const int other = peer.ordinal();
    if (other == ordinal_) return true;
    int can = 0;
    check(lib().hipDeviceCanAccessPeer(&can, ordinal_, other), "hipDeviceCanAccessPeer");
    return can != 0;
  }
  void enable_peer_access(const Device& peer) override {
    if (peer.ordinal() == ordinal_) return;
    current();
    const hipError_t r = lib().hipDeviceEnablePeerAccess(peer.ordinal(), 0);
    if (r != hipErrorPeerAccessAlreadyEnabled) check(r, "hipDeviceEnablePeerAccess");
  }

  StreamHandle create_stream() override {
    current();
    hipStream_t s = nullptr;
    check(lib().hipStreamCreateWithFlags(&s, hipStreamNonBlocking), "hipStreamCreateWithFlags");
    return s;
  }
  void destroy_stream(StreamHandle s) override { (void)lib().hipStreamDestroy(static_cast<hipStream_t>(s)); }
  void synchronize(StreamHandle s) override {
    current();
    check(s ? lib().hipStreamSynchronize(static_cast<hipStream_t>(s)) : lib().hipDeviceSynchronize(), "synchronize");
  }
  EventHandle create_event() override {
    current();
    hipEvent_t e = nullptr;
    check(lib().hipEventCreate(&e), "hipEventCreate");
    return e;
  }
  void destroy_event(EventHandle e) override { (void)lib().hipEventDestroy(static_cast<hipEvent_t>(e)); }
  void record(EventHandle e, StreamHandle s) override {
    check(lib().hipEventRecord(static_cast<hipEvent_t>(e), static_cast<hipStream_t>(s)), "hipEventRecord");
  }
  float elapsed_ms(EventHandle a, EventHandle b) override {
    float ms = 0;
    check(lib().hipEventElapsedTime(&ms, static_cast<hipEvent_t>(a), static_cast<hipEvent_t>(b)), "hipEventElapsedTime");
    return ms;
  }
  void begin_capture(StreamHandle s) override {
    current();
    check(lib().hipStreamBeginCapture(static_cast<hipStream_t>(s), hipStreamCaptureModeRelaxed), "hipStreamBeginCapture");
  }
  bool capturing(StreamHandle s) override {
    current();
    hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
    check(lib().hipStreamIsCapturing(static_cast<hipStream_t>(s), &status), "hipStreamIsCapturing");
    return status != hipStreamCaptureStatusNone;
  }
  GraphHandle end_capture(StreamHandle s) override {
    current();
    hipGraph_t graph = nullptr;
    check(lib().hipStreamEndCapture(static_cast<hipStream_t>(s), &graph), "hipStreamEndCapture");
    hipGraphExec_t exec = nullptr;
    hipError_t r = lib().hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0);
    (void)lib().hipGraphDestroy(graph);
    check(r, "hipGraphInstantiate");
    return exec;
  }
  void launch_graph(GraphHandle g, StreamHandle s) override {
    current();
    check(lib().hipGraphLaunch(static_cast<hipGraphExec_t>(g), static_cast<hipStream_t>(s)), "hipGraphLaunch");
  }
  void destroy_graph(GraphHandle g) override { (void)lib().hipGraphExecDestroy(static_cast<hipGraphExec_t>(g)); }

 private:
  void current() { check(lib().hipSetDevice(ordinal_), "hipSetDevice"); }
  int ordinal_;
  std::string name_, arch_;
  int sms_ = 0;
};

}  // namespace

std::unique_ptr<Device> open_hip_device(int ordinal) { return std::make_unique<HipDevice>(ordinal); }

}  // namespace megamoe
