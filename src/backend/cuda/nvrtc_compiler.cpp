// The cuda backend's compiler: NVRTC, producing a cubin for one sm_XY[a] target; a kernel with
// link inputs is compiled to LTO-IR and linked with them by nvJitLink.
#include <algorithm>
#include <nvrtc.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backend/backend.hpp"
#include "backend/cuda/nvjitlink_linker.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {
namespace {

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw Error(fmt::format("megamoe: NVRTC {} failed: {}", what, nvrtcGetErrorString(r)));
}

// "sm_90a" -> 90; -1 when not of the form sm_<digits>[a].
int sm_number(const std::string& arch) {
  if (!arch.starts_with("sm_")) return -1;
  std::string digits = arch.substr(3);
  if (!digits.empty() && digits.back() == 'a') digits.pop_back();
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoi(digits);
}

// The target of an option list ("--gpu-architecture=sm_90a").
std::string arch_of(const std::vector<std::string>& options) {
  for (const std::string& o : options)
    if (o.starts_with("--gpu-architecture=")) return o.substr(19);
  throw Error("megamoe: NVRTC options without --gpu-architecture: the link needs the target");
}

class NvrtcCompiler final : public Compiler {
 public:
  BackendKind kind() const override { return BackendKind::cuda; }

  std::string identity() const override {
    int major = 0, minor = 0;
    check(nvrtcVersion(&major, &minor), "nvrtcVersion");
    return fmt::format("nvrtc {}.{}", major, minor);
  }

  std::string default_arch() const override { return "sm_90a"; }

  void check_arch(const std::string& arch) const override {
    int n = 0;
    check(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
    std::vector<int> archs(n);
    check(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
    int sm = sm_number(arch);
    if (sm < 0 || std::find(archs.begin(), archs.end(), sm) == archs.end())
      throw Error(fmt::format("megamoe: NVRTC cannot compile for arch '{}' (supported: sm_{})", arch,
                              fmt::join(archs, ", sm_")));
  }

  std::vector<std::string> options_for(const std::string& arch) const override {
    return {"--gpu-architecture=" + arch, "--std=c++17", "-DMEGAMOE_NVRTC=1"};
  }

  std::string binary_suffix() const override { return "cubin"; }
  std::vector<std::string> link_options() const override { return {"-dlto", "--relocatable-device-code=true"}; }
  std::string linker_identity() const override { return nvjitlink_identity(); }

  CompileOutput compile(const CompileInput& in) const override {
    std::vector<const char*> header_texts, header_names, options;
    for (auto& h : in.headers) header_texts.push_back(h.text.c_str()), header_names.push_back(h.path.c_str());
    for (auto& o : in.options) options.push_back(o.c_str());

    nvrtcProgram prog;
    check(nvrtcCreateProgram(&prog, in.source.c_str(), (in.kernel_name + ".cu").c_str(),
                             int(header_texts.size()), header_texts.data(), header_names.data()),
          "nvrtcCreateProgram");
    struct Destroy {
      nvrtcProgram* p;
      ~Destroy() { nvrtcDestroyProgram(p); }
    } destroy{&prog};

    CompileOutput out;
    nvrtcResult r = nvrtcCompileProgram(prog, int(options.size()), options.data());
    std::size_t log_size = 0;
    check(nvrtcGetProgramLogSize(prog, &log_size), "nvrtcGetProgramLogSize");
    out.log.resize(log_size);
    check(nvrtcGetProgramLog(prog, out.log.data()), "nvrtcGetProgramLog");
    while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
    if (r != NVRTC_SUCCESS) {
      if (out.log.empty()) out.log = nvrtcGetErrorString(r);
      return out;
    }
    std::size_t size = 0;
    if (!in.link.empty()) {
      check(nvrtcGetLTOIRSize(prog, &size), "nvrtcGetLTOIRSize");
      std::string lto(size, '\0');
      check(nvrtcGetLTOIR(prog, lto.data()), "nvrtcGetLTOIR");
      std::string link_log;
      out.ok = link_lto(arch_of(in.options), lto, in.link, out.binary, link_log);
      if (!link_log.empty()) out.log += (out.log.empty() ? "" : "\n") + link_log;
      return out;
    }
    check(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
    out.binary.resize(size);
    check(nvrtcGetCUBIN(prog, out.binary.data()), "nvrtcGetCUBIN");
    out.ok = true;
    return out;
  }
};

}  // namespace

std::unique_ptr<Compiler> make_nvrtc_compiler() { return std::make_unique<NvrtcCompiler>(); }

}  // namespace megamoe
