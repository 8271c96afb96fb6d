// The hip backend's compiler: hipRTC, producing an AMDGPU code object for one gfx target.
#include <fmt/format.h>

#include "backend/backend.hpp"
#include "backend/hip/hip_library.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {
namespace {

// Debian's HIP 5.2 (comgr 2.4) aborts the whole process on targets it does not know, so only
// these are passed on. It knows no gfx942/gfx950 (MI300/MI355X) yet.
constexpr const char* kKnownArchs[] = {"gfx908", "gfx90a"};

class HiprtcCompiler final : public Compiler {
 public:
  BackendKind kind() const override { return BackendKind::hip; }

  std::string identity() const override {
    int v = 0;
    auto& l = hip::loaded_library();
    if (l.hipRuntimeGetVersion(&v) != hipSuccess) throw Error("megamoe: hipRuntimeGetVersion failed");
    return fmt::format("hiprtc {}.{}.{}", v / 10000000, v / 100000 % 100, v % 100000);
  }

  std::string default_arch() const override { return "gfx90a"; }

  void check_arch(const std::string& arch) const override {
    std::string base = arch.substr(0, arch.find(':'));
    for (auto k : kKnownArchs)
      if (base == k) return;
    throw Error(fmt::format("megamoe: this hipRTC cannot compile for arch '{}' (supported: gfx908, gfx90a)", arch));
  }

  std::vector<std::string> options_for(const std::string& arch) const override {
    return {"--offload-arch=" + arch, "-O3", "-std=c++17", "-DMEGAMOE_HIPRTC=1"};
  }

  std::string binary_suffix() const override { return "hsaco"; }

  std::vector<std::string> link_options() const override { return {}; }
  std::string linker_identity() const override {
    throw Error("megamoe: the hip backend links no device library into a kernel (the nvshmem transport is NVIDIA's)");
  }
  CompileOutput compile(const CompileInput& in) const override {
    if (!in.link.empty()) linker_identity();  // throws
    auto& l = hip::loaded_library();
    auto check = [&](hiprtcResult r, const char* what) {
      if (r != HIPRTC_SUCCESS)
        throw Error(fmt::format("megamoe: hipRTC {} failed: {}", what, l.hiprtcGetErrorString(r)));
    };
    std::vector<const char*> texts, names, options;
    for (auto& h : in.headers) texts.push_back(h.text.c_str()), names.push_back(h.path.c_str());
    for (auto& o : in.options) options.push_back(o.c_str());
    hiprtcProgram prog;
    check(l.hiprtcCreateProgram(&prog, in.source.c_str(), (in.kernel_name + ".hip").c_str(), int(texts.size()),
                                texts.data(), names.data()),
          "hiprtcCreateProgram");
    struct Destroy {
      const hip::Library& l;
      hiprtcProgram* p;
      ~Destroy() { (void)l.hiprtcDestroyProgram(p); }
    } destroy{l, &prog};
    CompileOutput out;
    hiprtcResult r = l.hiprtcCompileProgram(prog, int(options.size()), options.data());
    std::size_t log_size = 0;
    check(l.hiprtcGetProgramLogSize(prog, &log_size), "hiprtcGetProgramLogSize");
    out.log.resize(log_size);
    if (log_size) check(l.hiprtcGetProgramLog(prog, out.log.data()), "hiprtcGetProgramLog");
    while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
    if (r != HIPRTC_SUCCESS) {
      if (out.log.empty()) out.log = l.hiprtcGetErrorString(r);
      return out;
    }
    std::size_t size = 0;
    check(l.hiprtcGetCodeSize(prog, &size), "hiprtcGetCodeSize");
    out.binary.resize(size);
    check(l.hiprtcGetCode(prog, out.binary.data()), "hiprtcGetCode");
    out.ok = true;
    return out;
  }
};

}  // namespace

std::unique_ptr<Compiler> make_hiprtc_compiler() { return std::make_unique<HiprtcCompiler>(); }

}  // namespace megamoe
