// The backends: the run-time compiler of each (kernel source in, loadable binary out) and the
// factories of their compilers and devices (backend.cpp picks one by BackendKind).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/source_file.hpp"
#include "megamoe/device.hpp"

namespace megamoe {

// What a kernel that calls another library's device code is linked with (cuda: the nvshmem
// transport's kernels, NVSHMEM's device library through nvJitLink).
struct LinkInputs {
  std::vector<std::string_view> objects;  // relocatable objects' bytes (LTO-IR inside)
  std::vector<std::string> libraries;     // static libraries, by path
  bool empty() const { return objects.empty() && libraries.empty(); }
};

struct CompileInput {
  std::string kernel_name;
  std::string source;
  std::vector<SourceFile> headers;   // handed to the compiler in memory
  std::vector<std::string> options;  // complete, the target arch included
  LinkInputs link;                   // none: compiled on its own
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
  // Options that make compile() link in.link (part of the cache key), and the linker's name and
  // version; megamoe::Error where the backend cannot link.
  virtual std::vector<std::string> link_options() const = 0;
  virtual std::string linker_identity() const = 0;
};

// Throws megamoe::Error if the backend was not built in (hip without HIP headers).
std::unique_ptr<Compiler> make_compiler(BackendKind kind);

std::unique_ptr<Compiler> make_nvrtc_compiler();
std::unique_ptr<Compiler> make_hiprtc_compiler();  // only with MEGAMOE_HAVE_HIP
std::unique_ptr<Device> open_cuda_device(int ordinal);
std::unique_ptr<Device> open_hip_device(int ordinal);  // only with MEGAMOE_HAVE_HIP

}  // namespace megamoe
