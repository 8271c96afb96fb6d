// Each kernel path as one definition (PortablePath, TensorCorePath, HopperPath): its kernels on one
// GPU and as a rank of a group, each typed by its argument struct and held as H<Args> (the specs,
// TypedSpec, or the loaded kernels, Kernel in runtime/bucket_kernels.hpp); how a bucket specifies
// them, the arithmetic they run, their tiles; and its launchers, declared here and defined in
// runtime/launch_layer_<path>.cpp (the runtime's floor). What a path requires of a model's shape is
// its row of config/path_requirements.cpp. Every dispatch on the path goes through KernelPaths:
// adding a path is its definition, its spec builders and launchers, its requirements row, and its
// name in KernelPaths.
#pragma once
#include <tuple>
#include <utility>
#include <variant>

#include "codegen/kernel_specs.hpp"
#include "megamoe/config.hpp"
#include "megamoe/errors.hpp"

#include <fmt/format.h>

namespace megamoe {

template <class Args>
struct Kernel;     // runtime/bucket_kernels.hpp: a kernel loaded on the device
struct LayerCall;  // runtime/launch_layer.hpp: one call on one GPU
struct EpCall;     // runtime/launch_ep.hpp: one call of a rank of a group

struct PortablePath;
struct TensorCorePath;
struct HopperPath;

// The kernels of a path. members(): every one, in launch order; With<To>: the same set held as To.
// The portable and tensor-core paths: x to fp8 by token, then the stages on Stage1Args/Stage2Args.
template <class Path_, template <class> class H>
struct QuantizedRowsKernelSet {
  using Path = Path_;
  template <template <class> class To>
  using With = QuantizedRowsKernelSet<Path_, To>;
  H<QuantizeRowsArgs> quantize;
  H<Stage1Args> stage1;
  H<Stage2Args> stage2;
  auto members() const { return std::tie(quantize, stage1, stage2); }
  auto members() { return std::tie(quantize, stage1, stage2); }
};
template <template <class> class H>
using PortableKernelSet = QuantizedRowsKernelSet<PortablePath, H>;
template <template <class> class H>
using TensorCoreKernelSet = QuantizedRowsKernelSet<TensorCorePath, H>;
template <template <class> class H>
struct HopperKernelSet {
  using Path = HopperPath;
  template <template <class> class To>
  using With = HopperKernelSet<To>;
  H<DispatchRowsArgs> dispatch;
  H<Stage1HopperArgs> stage1;
  H<Stage2HopperArgs> stage2;
  auto members() const { return std::tie(dispatch, stage1, stage2); }
  auto members() { return std::tie(dispatch, stage1, stage2); }
};

// Over several ranks: the stages with the protocol around them (Stage1 runs the dispatch), and
// the serial path's single-GPU Stage1, launched after dispatch_ep.
template <class Path_, template <class> class H, class S1Ep, class S2Ep, class S1>
struct EpKernelSet {
  using Path = Path_;
  template <template <class> class To>
  using With = EpKernelSet<Path_, To, S1Ep, S2Ep, S1>;
  H<S1Ep> stage1;
  H<S2Ep> stage2;
  H<S1> stage1_serial;
  auto members() const { return std::tie(stage1, stage2, stage1_serial); }
  auto members() { return std::tie(stage1, stage2, stage1_serial); }
};
template <template <class> class H>
using PortableEpKernelSet = EpKernelSet<PortablePath, H, Stage1EpArgs, Stage2EpArgs, Stage1Args>;
template <template <class> class H>
using TensorCoreEpKernelSet = EpKernelSet<TensorCorePath, H, Stage1EpArgs, Stage2EpArgs, Stage1Args>;
template <template <class> class H>
using HopperEpKernelSet = EpKernelSet<HopperPath, H, Stage1HopperEpArgs, Stage2HopperEpArgs, Stage1HopperArgs>;

// Token rows per Stage1 and Stage2 tile, and weight-row tiles across each stage's outputs.
struct PathTiles {
  int bm1 = 0, bm2 = 0;
  int columns1 = 0, columns2 = 0;
};

// A path's definition, each alike: its kernel sets; (defined in codegen/kernel_specs_<path>.cpp)
// the arithmetic its kernels run, its tiles, its specs on one GPU and as a rank of a group, and the
// serial path's dispatch; (defined in runtime/launch_layer_<path>.cpp) its launchers, between
// routing and combine.

// The portable path (every GPU): x to fp8 by token, Stage1 and Stage2 over weight layout v1.
struct PortablePath {
  static constexpr KernelPath kPath = KernelPath::portable;
  template <template <class> class H>
  using Kernels = PortableKernelSet<H>;
  template <template <class> class H>
  using EpKernels = PortableEpKernelSet<H>;
  static PathArithmetic arithmetic(const Config& config, const BucketConfig& bucket);
  static PathTiles tiles(const ModelShape& padded, const BucketConfig& bucket);
  static Kernels<TypedSpec> specs(const Config& config, const BucketConfig& bucket, const PathTiles& t,
                                  const PathArithmetic& a);
  static EpKernels<TypedSpec> ep_specs(const Config& config, const BucketConfig& bucket, const PathTiles& t,
                                       const PathArithmetic& a);
  static TypedSpec<DispatchEpArgs> dispatch_ep(const Config& config, const BucketConfig& bucket, const PathArithmetic& a);
  static void launch(const LayerCall& call, const Kernels<Kernel>& kernels);
  static void launch_ep(const EpCall& call, const EpKernels<Kernel>& kernels);
};

// The tensor-core path (sm_89 and up): as the portable one over weight layout v3, scale blocks of 64.
struct TensorCorePath {
  static constexpr KernelPath kPath = KernelPath::tensor_core;
  template <template <class> class H>
  using Kernels = TensorCoreKernelSet<H>;
  template <template <class> class H>
  using EpKernels = TensorCoreEpKernelSet<H>;
  static PathArithmetic arithmetic(const Config& config, const BucketConfig& bucket);
  static PathTiles tiles(const ModelShape& padded, const BucketConfig& bucket);
  static Kernels<TypedSpec> specs(const Config& config, const BucketConfig& bucket, const PathTiles& t,
                                  const PathArithmetic& a);
  static EpKernels<TypedSpec> ep_specs(const Config& config, const BucketConfig& bucket, const PathTiles& t,
                                       const PathArithmetic& a);
  static TypedSpec<DispatchEpArgs> dispatch_ep(const Config& config, const BucketConfig& bucket, const PathArithmetic& a);
  static void launch(const LayerCall& call, const Kernels<Kernel>& kernels);
  static void launch_ep(const EpCall& call, const EpKernels<Kernel>& kernels);
};

// The Hopper path (sm_90a): x quantized once into the routed layout, wgmma stages
// (docs/hopper-plan.md).
struct HopperPath {
  static constexpr KernelPath kPath = KernelPath::hopper;
  template <template <class> class H>
  using Kernels = HopperKernelSet<H>;
  template <template <class> class H>
  using EpKernels = HopperEpKernelSet<H>;
  static PathArithmetic arithmetic(const Config& config, const BucketConfig& bucket);
  static PathTiles tiles(const ModelShape& padded, const BucketConfig& bucket);
  static Kernels<TypedSpec> specs(const Config& config, const BucketConfig& bucket, const PathTiles& t,
                                  const PathArithmetic& a);
  static EpKernels<TypedSpec> ep_specs(const Config& config, const BucketConfig& bucket, const PathTiles& t,
                                       const PathArithmetic& a);
  static TypedSpec<DispatchEpArgs> dispatch_ep(const Config& config, const BucketConfig& bucket, const PathArithmetic& a);
  static void launch(const LayerCall& call, const Kernels<Kernel>& kernels);
  static void launch_ep(const EpCall& call, const EpKernels<Kernel>& kernels);
};

// Every path, in the order of KernelPath's values.
using KernelPaths = std::tuple<PortablePath, TensorCorePath, HopperPath>;

template <template <class> class H, class... P>
std::variant<typename P::template Kernels<H>...> kernels_variant(std::tuple<P...>*);
template <template <class> class H, class... P>
std::variant<typename P::template EpKernels<H>...> ep_kernels_variant(std::tuple<P...>*);

// A bucket's path kernels, whichever path: on one GPU, and as a rank of a group.
template <template <class> class H>
using PathKernels = decltype(kernels_variant<H>(static_cast<KernelPaths*>(nullptr)));
template <template <class> class H>
using EpPathKernels = decltype(ep_kernels_variant<H>(static_cast<KernelPaths*>(nullptr)));

// f(P{}) for the definition P of `path` (a resolved one; an Error for automatic).
template <class F, class... P>
void with_path_in(KernelPath path, F&& f, std::tuple<P...>*) {
  const bool found = ((P::kPath == path ? (f(P{}), true) : false) || ...);
  if (!found) throw Error(fmt::format("megamoe: path {} has no definition (resolve automatic first)", to_string(path)));
}
template <class F>
void with_path(KernelPath path, F&& f) {
  with_path_in(path, f, static_cast<KernelPaths*>(nullptr));
}

// f(a_i, b_i) for the members of two sets of one path, in order.
template <class A, class B, class F>
void zip_members(const A& a, B& b, F&& f) {
  auto as = a.members();
  auto bs = b.members();
  [&]<std::size_t... I>(std::index_sequence<I...>) { (f(std::get<I>(as), std::get<I>(bs)), ...); }(
      std::make_index_sequence<std::tuple_size_v<decltype(as)>>{});
}

}  // namespace megamoe
