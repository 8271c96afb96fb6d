// GPU tests of device functions: `out[i] = f(in)` for every i, one thread per element, built
// by the library's own JIT from a body of text and run on device 0.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "jit/kernel_builder.hpp"
#include "megamoe/megamoe.hpp"

namespace megamoe::test {

// in_type / out_type: the element types as the kernel spells them; statement: C++ that sets
// out[i] for i < n (n = n_out) from `in`; preamble: definitions it needs. The host vectors hold
// the same types.
template <class In, class Out>
std::vector<Out> run_elementwise(const std::string& family, const std::vector<std::string>& includes,
                                 const std::string& in_type, const std::string& out_type, const std::string& statement,
                                 const std::vector<In>& in, std::size_t n_out, const std::string& preamble = "") {
  std::unique_ptr<Device> dev = open_device(BackendKind::cuda);
  // The test's own argument struct and template, in the rendered source's preamble.
  KernelSpec s;
  s.family = family;
  s.includes = includes;
  s.preamble = preamble + "struct ElementwiseArgs {\n  const " + in_type + "* in;\n  " + out_type +
               "* out;\n  int n;\n};\n__device__ void elementwise(const ElementwiseArgs& a) {\n  const " + in_type +
               "* in = a.in;\n  " + out_type + "* out = a.out;\n  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
               "  if (i >= a.n) return;\n  " + statement + "\n}\n";
  s.args = "megamoe_generated::ElementwiseArgs";
  s.function = "megamoe_generated::elementwise";
  s.threads = 256;
  KernelBuilder builder(make_compiler(BackendKind::cuda), dev->arch(), {});
  BuildReport built = builder.build(s);
  std::unique_ptr<Module> module = dev->load_module(built.kernel->binary);
  void* fn = module->function(built.kernel->symbol);

  int n = int(n_out);
  DeviceBuffer din(*dev, in.size() * sizeof(In)), dout(*dev, n_out * sizeof(Out));
  dev->copy_to_device(din.get(), in.data(), in.size() * sizeof(In));
  dev->fill_bytes(dout.get(), 0xAB, dout.bytes());  // poisoned: an element not written shows
  struct {  // ElementwiseArgs
    const void* in;
    void* out;
    int n;
  } a{din.get(), dout.get(), n};
  void* args[] = {&a};
  dev->launch(fn, Dim3{unsigned((n + 255) / 256), 1, 1}, Dim3{256, 1, 1}, 0, nullptr, args);
  dev->synchronize(nullptr);
  std::vector<Out> out(n_out);
  dev->copy_to_host(out.data(), dout.get(), out.size() * sizeof(Out));
  return out;
}

}  // namespace megamoe::test
