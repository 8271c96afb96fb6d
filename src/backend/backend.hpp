// The backends: the run-time compiler of each (kernel source in, loadable binary out) and the
// factories of their compilers and devices (backend.cpp picks one by BackendKind).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/source_file.hpp"
#include "megamoe/device.hpp"

namespace megamoe {

struct CompileInput {
  std::string kernel_name;
  std::string source;
  std::vector<SourceFile> headers;   // handed to the compiler in memory
  std::vector<std::string> options;  // complete, the target arch included
};

struct CompileOutput {
  bool ok = false;
  std::string binary;  // cubin / AMDGPU code object
  std::string log;
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual BackendKind kind() const = 0;
  // Compiler name and version, part of every cache key: "nvrtc 13.0".
  virtual std::string identity() const = 0;
  virtual std::string default_arch() const = 0;
  // Throws megamoe::Error naming the arch and the supported ones if it cannot compile for it.
  virtual void check_arch(const std::string& arch) const = 0;
  // The full option list for a target arch (also part of the cache key).
  virtual std::vector<std::string> options_for(const std::string& arch) const = 0;
  virtual std::string binary_suffix() const = 0;  // "cubin", "hsaco"
  virtual CompileOutput compile(const CompileInput& in) const = 0;
};

// Throws megamoe::Error if the backend was not built in (hip without HIP headers).
std::unique_ptr<Compiler> make_compiler(BackendKind kind);

std::unique_ptr<Compiler> make_nvrtc_compiler();
std::unique_ptr<Compiler> make_hiprtc_compiler();  // only with MEGAMOE_HAVE_HIP
std::unique_ptr<Device> open_cuda_device(int ordinal);
std::unique_ptr<Device> open_hip_device(int ordinal);  // only with MEGAMOE_HAVE_HIP

}  // namespace megamoe
