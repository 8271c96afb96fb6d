// libamdhip64 (HIP runtime and hipRTC in one library), loaded at run time so that the hip
// backend links without it and reports "no GPU driver found" where it is absent.
#pragma once
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#include <string>

namespace megamoe::hip {

#define MEGAMOE_HIP_FUNCTIONS(X)                                                                 \
  X(hipRuntimeGetVersion) X(hipInit) X(hipGetDeviceCount) X(hipSetDevice) X(hipGetDeviceProperties) \
  X(hipGetErrorString) X(hipFree) X(hipMemcpyHtoD) X(hipMemcpyDtoH) X(hipMemsetD8)    \
  X(hipModuleLoadData) X(hipModuleUnload) X(hipModuleGetFunction) X(hipModuleLaunchKernel)         \
  X(hipStreamCreateWithFlags) X(hipStreamDestroy) X(hipStreamSynchronize) X(hipDeviceSynchronize)  \
  X(hipEventCreate) X(hipEventDestroy) X(hipEventRecord) X(hipEventElapsedTime)                    \
  X(hiprtcCreateProgram) X(hiprtcCompileProgram) X(hiprtcGetProgramLogSize) X(hiprtcGetProgramLog) \
  X(hiprtcGetCodeSize) X(hiprtcGetCode) X(hiprtcDestroyProgram) X(hiprtcGetErrorString)                    \
  X(hipStreamBeginCapture) X(hipStreamEndCapture) X(hipGraphInstantiate) X(hipGraphLaunch)                 \
  X(hipGraphExecDestroy) X(hipGraphDestroy) X(hipMemcpyDtoDAsync) X(hipIpcGetMemHandle)                  \
  X(hipIpcOpenMemHandle) X(hipIpcCloseMemHandle) X(hipDeviceCanAccessPeer) X(hipDeviceEnablePeerAccess) \
  X(hipStreamIsCapturing)

struct Library {
#define X(name) decltype(&::name) name = nullptr;
  MEGAMOE_HIP_FUNCTIONS(X)
#undef X
  hipError_t (*hipMalloc)(void**, size_t) = nullptr;  // overloaded in the header: named by type
  std::string load_error;  // empty when loaded
};

const Library& library();

// Throws NoGpuError with the load error when libamdhip64 could not be loaded.
const Library& loaded_library();

}  // namespace megamoe::hip
