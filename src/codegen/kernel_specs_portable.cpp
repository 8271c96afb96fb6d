// The portable path's stage kernels (templates/moe/stage{1,2}_portable.cuh): CUDA cores, any GPU.
#include <fmt/format.h>

#include "codegen/kernel_specs.hpp"

namespace megamoe {

TypedSpec<Stage1Args> stage1_portable_spec(const Activation& act, int bm, bool bounds_check) {
  ActivationCode a = activation_code(act);
  TypedSpec<Stage1Args> s;
  s.family = "stage1_portable";
  s.name_parts = {a.tag, fmt::format("bm{}", bm), fmt::format("bw{}", kPortableBw), bounds_tag(bounds_check)};
  s.includes = {"moe/stage1_portable.cuh"};
  s.preamble = a.preamble;
  s.function = "megamoe::stage1_portable";
  s.template_args = {a.type, std::to_string(bm), std::to_string(kPortableBw), bool_literal(bounds_check)};
  s.threads = kPortableThreads;
  return s;
}

TypedSpec<Stage2Args> stage2_portable_spec(int bm, CombineWire wire, bool bounds_check) {
  TypedSpec<Stage2Args> s;
  s.family = "stage2_portable";
  s.name_parts = {fmt::format("bm{}", bm), fmt::format("bw{}", kPortableBw), wire_tag(wire), bounds_tag(bounds_check)};
  s.includes = {"moe/stage2_portable.cuh"};
  s.function = "megamoe::stage2_portable";
  s.template_args = {std::to_string(bm), std::to_string(kPortableBw), wire_code(wire), bool_literal(bounds_check)};
  s.threads = kPortableThreads;
  return s;
}

}  // namespace megamoe
