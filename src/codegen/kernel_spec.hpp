// A kernel variant to generate: which template, what it is specialised on, and the argument
// struct its entry point takes (templates/interface/kernel_args.cuh). Its name spells the
// specialisation. TypedSpec<Args> ties a spec to its argument struct on the host, so that the
// runtime can only launch it with that struct.
#pragma once
#include <string>
#include <vector>

#include "common/source_file.hpp"

namespace megamoe {

struct KernelSpec {
  std::string family;                   // "route", "stage1_tensor_core", "combine", ...
  std::vector<std::string> name_parts;  // e.g. {"situv2", "bm64", "bn256", "bc0"}
  std::vector<std::string> includes;    // template headers, relative to templates/
  std::string preamble;                 // definitions the call needs (activation parameters)
  std::string args;                     // the argument struct, qualified: "megamoe::" and its kName
  std::string function;                 // the template the entry point calls, qualified
  std::vector<std::string> template_args;
  int threads = 0;                      // block size (the entry point's launch bound)
  int min_blocks = 0;                   // blocks per SM in the launch bound (0: none); 1 lets setmaxnreg work
  int shared_bytes = 0;                 // dynamic shared memory per block at launch
  int cluster = 0;                      // blocks per cluster (0: none); the grid is a multiple of it
  // Calls NVSHMEM (the nvshmem transport's EP kernels): compiled with MEGAMOE_NVSHMEM defined and
  // linked with NVSHMEM's device library (jit/kernel_builder.cpp).
  bool nvshmem = false;

  // "megamoe_<family>_<part>_<part>...": readable, and the kernel's symbol.
  std::string name() const;
};

template <class Args>
struct TypedSpec : KernelSpec {
  TypedSpec() { args = std::string("megamoe::") + Args::kName; }
};

struct RenderedKernel {
  std::string name;                 // == symbol of the entry point
  std::string source;               // the translation unit handed to the compiler
  std::vector<SourceFile> headers;  // every template header it includes, transitively
  int threads = 0;
};

RenderedKernel render(const KernelSpec& spec);

}  // namespace megamoe
