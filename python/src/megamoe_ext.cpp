// megamoe._megamoe: the C++ library as Python sees it. Thin on purpose: python/megamoe/ checks
// tensors and picks streams; this module takes addresses and host arrays and calls the library.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "codegen/kernel_paths.hpp"
#include "common/embedded_files.hpp"
#include "error_translation.hpp"
#include "formats/formats.hpp"
#include "jit/disk_cache.hpp"
#include "jit/kernel_builder.hpp"
#include "jit/precompile.hpp"
#include "megamoe/megamoe.hpp"
#include "tensor_info.hpp"
#include "tune/tuner.hpp"
#include "weights/checkpoint_arrays.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace megamoe::python {

namespace {

using HostBytes = nb::ndarray<const std::uint8_t, nb::device::cpu, nb::c_contig>;
using HostFloats = nb::ndarray<const float, nb::device::cpu, nb::c_contig>;
using HostHalfWords = nb::ndarray<const std::uint16_t, nb::device::cpu, nb::c_contig>;  // bf16 bits
using OptionalFloats = std::optional<HostFloats>;  // a bias, or None

// A numpy array that owns a vector's bytes.
nb::ndarray<nb::numpy, std::uint8_t> numpy_bytes(std::vector<std::uint8_t> bytes, std::vector<std::size_t> shape) {
  auto* owned = new std::vector<std::uint8_t>(std::move(bytes));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<std::uint8_t>*>(p); });
  return nb::ndarray<nb::numpy, std::uint8_t>(owned->data(), shape.size(), shape.data(), owner);
}

std::vector<std::uint8_t> copy_bytes(const HostBytes& a) {
  return std::vector<std::uint8_t>(a.data(), a.data() + a.size());
}

using AnyHostArray = nb::ndarray<nb::device::cpu, nb::c_contig, nb::ro>;

// A numpy array of `dtype` that owns a vector's bytes.
nb::object numpy_of(std::vector<std::uint8_t> bytes, std::vector<std::size_t> shape, nb::dlpack::dtype dtype) {
  auto* owned = new std::vector<std::uint8_t>(std::move(bytes));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<std::uint8_t>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy>(owned->data(), shape.size(), shape.data(), owner, nullptr, dtype));
}

nb::object numpy_floats(const std::vector<float>& v, std::vector<std::size_t> shape) {
  if (v.empty()) return nb::none();
  std::vector<std::uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return numpy_of(std::move(bytes), std::move(shape), nb::dtype<float>());
}

using CheckpointArgs = std::vector<std::tuple<std::string, std::string, AnyHostArray>>;

// (role, name, array) each, as the C++ layouts take them (the arrays stay the caller's).
CheckpointArrays checkpoint_arrays(const CheckpointArgs& arrays) {
  CheckpointArrays a;
  for (const auto& [role, name, array] : arrays) {
    HostArrayView* v = role == "w1"          ? &a.w1
                       : role == "w1_scales" ? &a.w1_scales
                       : role == "up"        ? &a.up
                       : role == "up_scales" ? &a.up_scales
                       : role == "w2"        ? &a.w2
                       : role == "w2_scales" ? &a.w2_scales
                       : role == "b1"        ? &a.b1
                       : role == "up_b1"     ? &a.up_b1
                       : role == "b2"        ? &a.b2
                                             : nullptr;
    if (!v) throw Error("megamoe: checkpoint_to_halves: no array role '" + role + "'");
    v->name = name, v->data = array.data(), v->element_bytes = int(array.itemsize());
    v->shape.assign(array.shape_ptr(), array.shape_ptr() + array.ndim());
  }
  for (auto [v, role] : {std::pair{&a.w1, "w1"}, {&a.w1_scales, "w1_scales"}, {&a.up, "up"}, {&a.up_scales, "up_scales"},
                         {&a.w2, "w2"}, {&a.w2_scales, "w2_scales"}, {&a.b1, "b1"}, {&a.up_b1, "up_b1"}, {&a.b2, "b2"}})
    if (v->name.empty()) v->name = role;
  return a;
}

// The arrays checked against `layout`, nothing copied: (mxfp4, element_bytes).
nb::tuple check_checkpoint_py(const std::string& layout, int experts, int model_dim, int inter_dim,
                              const CheckpointArgs& arrays) {
  const CheckpointForm f =
      check_checkpoint(checkpoint_layout_from_name(layout), experts, model_dim, inter_dim, checkpoint_arrays(arrays));
  return nb::make_tuple(f.mxfp4, f.element_bytes);
}

// A checkpoint's host arrays, (role, name, array) each, in `layout`, as the library's halves
// (weights/checkpoint_arrays.hpp: the layouts' one copy): (w1, w1_scales, w2, w2_scales, b1, b2),
// None where absent; dense weights keep their dtype (bf16 as its uint16 bits).
nb::tuple checkpoint_to_halves_py(const std::string& layout, int experts, int model_dim, int inter_dim,
                                  const CheckpointArgs& arrays) {
  const CheckpointArrays a = checkpoint_arrays(arrays);
  HalvesArrays h;
  {
    nb::gil_scoped_release unlocked;
    h = checkpoint_to_halves(checkpoint_layout_from_name(layout), experts, model_dim, inter_dim, a);
  }
  const std::size_t E = experts, D = model_dim, I = inter_dim;
  const nb::dlpack::dtype weights = !h.mxfp4 && h.element_bytes == 4 ? nb::dtype<float>()
                                    : h.mxfp4                         ? nb::dtype<std::uint8_t>()
                                                                      : nb::dtype<std::uint16_t>();
  const std::size_t dk = h.mxfp4 ? D / 2 : D, ik = h.mxfp4 ? I / 2 : I;
  nb::object w1 = numpy_of(std::move(h.w1), {E, 2 * I, dk}, weights);
  nb::object w2 = numpy_of(std::move(h.w2), {E, D, ik}, weights);
  nb::object w1s = h.mxfp4 ? numpy_of(std::move(h.w1_scales), {E, 2 * I, D / 32}, weights) : nb::none();
  nb::object w2s = h.mxfp4 ? numpy_of(std::move(h.w2_scales), {E, D, I / 32}, weights) : nb::none();
  return nb::make_tuple(w1, w1s, w2, w2s, numpy_floats(h.b1, {E, 2 * I}), numpy_floats(h.b2, {E, D}));
}

nb::dict config_info(const std::string& name) {
  const Config c = load_config(name);
  nb::dict d;
  d["name"] = c.name, d["source"] = c.source;
  d["experts"] = c.model.experts, d["bucket_keys_experts_per_rank"] = c.keys_experts_per_rank;
  d["model_dim"] = c.model.model_dim, d["inter_dim"] = c.model.inter_dim, d["topk"] = c.model.topk;
  d["expert_biases"] = c.model.expert_biases;
  d["shared_experts"] = c.model.shared_experts, d["shared_expert_scale"] = c.model.shared_expert_scale;
  d["activation"] = std::string(to_string(c.activation.kind));
  d["beta"] = c.activation.beta, d["linear_beta"] = c.activation.linear_beta, d["limit"] = c.activation.limit;
  d["alpha"] = c.activation.alpha, d["up_offset"] = c.activation.up_offset;
  d["activations_format"] = c.quant.activations, d["weights_format"] = c.quant.weights;
  nb::list buckets;
  for (const BucketConfig& b : c.buckets) buckets.append(b.bucket);
  d["buckets"] = buckets;
  nb::list tables;  // the cards the config has tables for, its default's first ("default" where it names none)
  for (const BucketTable& t : c.tables) tables.append(table_name(t.card));
  d["bucket_tables"] = tables;
  return d;
}

// Quantizes the last axis (a multiple of 32) of fp32 or bf16 values to MXFP4, as the library's
// quantize_expert_weights does: packed [..., K/2] and e8m0 scales [..., K/32].
nb::tuple quantize_mxfp4(nb::ndarray<nb::device::cpu, nb::c_contig, nb::ro> w) {
  if (w.ndim() < 1 || w.shape(w.ndim() - 1) % 32)
    throw Error("megamoe: quantize_mxfp4: the last axis has " +
                std::to_string(w.ndim() ? w.shape(w.ndim() - 1) : 0) + " values, expected a multiple of 32");
  const std::size_t n = w.size();
  std::vector<float> widened;
  const float* v = nullptr;
  if (w.dtype() == nb::dtype<float>()) {
    v = static_cast<const float*>(w.data());
  } else if (w.dtype() == nb::dtype<std::uint16_t>() ||
             w.dtype() == nb::dlpack::dtype{std::uint8_t(nb::dlpack::dtype_code::Bfloat), 16, 1}) {
    widened.resize(n);
    const auto* b = static_cast<const std::uint16_t*>(w.data());
    for (std::size_t i = 0; i < n; ++i) widened[i] = formats::bf16_to_float(b[i]);
    v = widened.data();
  } else {
    throw Error("megamoe: quantize_mxfp4: values must be float32, or bfloat16 (or its bits as uint16)");
  }
  std::vector<std::uint8_t> packed(n / 2), scales(n / 32);
  {
    nb::gil_scoped_release unlocked;
    formats::quantize_mxfp4(v, n, packed.data(), scales.data());
  }
  std::vector<std::size_t> shape(w.shape_ptr(), w.shape_ptr() + w.ndim()), sshape = shape;
  shape.back() /= 2, sshape.back() /= 32;
  return nb::make_tuple(numpy_bytes(std::move(packed), shape), numpy_bytes(std::move(scales), sshape));
}

nb::ndarray<nb::numpy, float> dequantize_mxfp4(HostBytes packed, HostBytes scales) {
  if (packed.ndim() < 1 || scales.ndim() != packed.ndim() || scales.size() * 16 != packed.size())
    throw Error("megamoe: dequantize_mxfp4: scales must have one byte per 16 packed bytes, along the same axes");
  const std::size_t n = packed.size() * 2;
  auto* out = new std::vector<float>(n);
  nb::capsule owner(out, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  formats::dequantize_mxfp4(packed.data(), scales.data(), n, out->data());
  std::vector<std::size_t> shape(packed.shape_ptr(), packed.shape_ptr() + packed.ndim());
  shape.back() *= 2;
  return nb::ndarray<nb::numpy, float>(out->data(), shape.size(), shape.data(), owner);
}

// megamoe-tune's search (tools/tune/tuner.hpp) on GPU 0; progress(line) for each line it prints.
nb::dict run_tuner(const std::string& config, const std::string& out, const std::string& start, const std::vector<int>& buckets,
              double minutes, const std::string& journal, int pairs, double min_gain, bool fp8_resident, bool fp8_wire,
              bool search_modes, const std::string& modes, std::uint64_t seed, int jobs, int world,
              const std::string& transport, const std::string& table, nb::object progress) {
  tune::TuneOptions o;
  o.table = table;
  o.world = world, o.transport = transport_from_name(transport);
  o.config = config, o.out = out, o.start = start, o.buckets = buckets, o.minutes = minutes, o.journal = journal;
  o.pairs = pairs, o.min_gain = min_gain, o.seed = seed, o.threads = jobs;
  o.space.fp8_resident = fp8_resident, o.space.fp8_wire = fp8_wire, o.space.modes = search_modes;
  if (!modes.empty()) o.modes = tune::parse_modes(modes, {});
  // The callback runs on this thread and on the compile workers: an exception it raises is kept
  // (the first) and raised once the search returns, never thrown across a worker; Ctrl-C on this
  // thread stops the search at its next line.
  const std::thread::id caller = std::this_thread::get_id();
  std::optional<nb::python_error> raised;
  o.print = [&](const std::string& line) {
    nb::gil_scoped_acquire locked;
    if (raised) {  // raised on a worker: stop at this thread's next line
      if (std::this_thread::get_id() == caller) throw Error("megamoe: tune: stopped by Python");
      return;
    }
    try {
      if (!progress.is_none()) progress(line);
      if (std::this_thread::get_id() == caller && PyErr_CheckSignals() != 0) throw nb::python_error();
    } catch (nb::python_error& e) {
      raised.emplace(std::move(e));
      if (std::this_thread::get_id() == caller) throw Error("megamoe: tune: stopped by Python");
    }
  };
  tune::TuneResult r;
  try {
    nb::gil_scoped_release unlocked;
    r = tune::run_tune(o);
  } catch (const Error&) {
    if (raised) throw std::move(*raised);
    throw;
  }
  if (raised) throw std::move(*raised);
  nb::list rows;
  for (const tune::BucketReport& b : r.rows) {
    nb::dict d;
    d["bucket"] = b.bucket, d["rows_per_expert"] = b.rows_per_expert, d["start"] = b.start_tactic;
    d["tuned"] = b.tuned_tactic, d["runner_up"] = b.runner_up_tactic, d["start_ms"] = b.start_ms;
    d["tuned_ms"] = b.tuned_ms, d["runner_up_ms"] = b.runner_up_ms, d["timed"] = b.timed, d["pruned"] = b.pruned;
    d["note"] = b.note;
    rows.append(d);
  }
  nb::list dispatch_rows;
  for (const tune::DispatchReport& b : r.dispatch_rows) {
    nb::dict d;
    d["bucket"] = b.bucket, d["tokens"] = b.tokens, d["start"] = b.start, d["tuned"] = b.tuned;
    d["runner_up"] = b.runner_up, d["start_ms"] = b.start_ms, d["tuned_ms"] = b.tuned_ms;
    d["runner_up_ms"] = b.runner_up_ms, d["timed"] = b.timed, d["note"] = b.note;
    dispatch_rows.append(d);
  }
  nb::dict d;
  d["dispatch_rows"] = dispatch_rows;
  d["config"] = out, d["name"] = r.tuned.name, d["modes"] = tune::to_string(r.modes), d["rows"] = rows;
  d["report"] = r.report, d["seconds"] = r.seconds, d["compile_seconds"] = r.compile_seconds;
  d["kernels_compiled"] = r.kernels_compiled, d["cut_short"] = r.cut_short;
  return d;
}

// Compiles a config's kernels into the cache; progress(line) after each kernel.
nb::list precompile(const std::string& config_name, const std::vector<int>& buckets, std::string arch,
                    const std::string& path, int world, int jobs, int shared_experts, const std::string& table,
                    nb::object progress) {
  Config config = load_config(config_name);
  if (shared_experts >= 0) config = with_shared_experts(std::move(config), shared_experts);
  std::shared_ptr<const Compiler> compiler(make_compiler(BackendKind::cuda));
  if (arch.empty()) arch = compiler->default_arch();
  KernelBuilder& builder = shared_kernel_builder(BackendKind::cuda, arch);
  const KernelPath p = resolve_path(path_from_name(path), config, BackendKind::cuda, arch);
  std::vector<PrecompileJob> plan = plan_precompile(builder, configs_for_tables(config, table), buckets, {p}, world);
  if (jobs <= 0) jobs = int(std::max(1u, std::thread::hardware_concurrency()));
  std::optional<nb::python_error> raised;
  {
    nb::gil_scoped_release unlocked;
    run_precompile(builder, plan, jobs, [&](const PrecompileJob& j, std::size_t done, std::size_t total) {
      if (progress.is_none()) return;
      nb::gil_scoped_acquire locked;
      if (raised) return;  // the callback raised: kept, raised once the workers are done
      std::string line = "[" + std::to_string(done) + "/" + std::to_string(total) + "] " +
                         (j.error.empty() ? std::string(to_string(j.report.origin)) : "FAILED") + " " +
                         j.planned.rendered.name;
      try {
        progress(line);
      } catch (nb::python_error& e) {
        raised.emplace(std::move(e));
      }
    });
  }
  if (raised) throw std::move(*raised);
  nb::list results;
  for (const PrecompileJob& j : plan) {
    nb::dict r;
    r["name"] = j.planned.rendered.name, r["key"] = j.planned.key.hex;
    r["result"] = j.error.empty() ? (j.report.origin == BuildOrigin::compiled ? "compiled" : "hit") : "failed";
    r["seconds"] = j.report.seconds, r["error"] = j.error, r["buckets"] = nb::cast(j.buckets);
    results.append(r);
  }
  return results;
}

nb::dict workspace_dict(const WorkspaceBytes& b) {
  nb::dict d;
  d["layer"] = b.layer, d["symmetric_region"] = b.symmetric_region, d["group_plan"] = b.group_plan;
  d["routed_rows"] = b.routed_rows, d["total"] = b.total();
  return d;
}

// Runtime::workspace_bytes of a layer not yet created (arguments as the Layer's).
nb::dict planned_workspace_bytes(const std::string& config, int max_tokens, int world, const std::string& path,
                                 const std::string& arch, long long routed_rows_capacity, bool fp8_resident_weights,
                                 int experts_per_rank, int redundant_experts, int shared_experts,
                                 float shared_expert_scale, const std::string& transport, int node_size,
                                 const std::string& bucket_table) {
  RuntimeOptions o;
  o.bucket_table = bucket_table;
  o.transport = transport_from_name(transport), o.node_size = node_size;
  o.max_tokens = max_tokens, o.world = world, o.path = path_from_name(path), o.redundant_experts = redundant_experts;
  o.routed_rows_capacity = routed_rows_capacity, o.fp8_resident_weights = fp8_resident_weights;
  Config c = load_config(config);
  if (experts_per_rank > 0) c = with_experts(std::move(c), experts_per_rank * world);
  if (shared_experts >= 0) c = with_shared_experts(std::move(c), shared_experts, shared_expert_scale);
  nb::dict d = workspace_dict(Runtime::workspace_bytes(c, o, arch));
  d["weights"] = Runtime::weights_bytes(std::move(c), o, arch);
  return d;
}

// Expert weights in a runtime's layout: a layer's (Layer.load_weights), or experts waiting to be
// copied into a layer's slots (Layer.stage_experts). Their buffers are freed through the runtime's
// device: it is kept alive until they are.
struct Weights {
  std::shared_ptr<Runtime> owner;
  std::shared_ptr<PreparedWeights> weights;
};

// One rank's runtime (kernels, workspace, group), which every layer of a model can share: each
// layer holds only its Weights.
class PyRuntime {
 public:
  PyRuntime(const std::string& config, int max_tokens, int device, const std::string& path, int world, int rank,
            const std::string& transport, int timeout_ms, nb::object all_gather, long long routed_rows_capacity,
            bool fp8_resident_weights, int experts_per_rank, int redundant_experts, int shared_experts,
            float shared_expert_scale, int node_size, const std::string& bucket_table) {
    RuntimeOptions o;
    o.node_size = node_size;
    o.bucket_table = bucket_table;
    o.redundant_experts = redundant_experts;
    o.device = device, o.max_tokens = max_tokens, o.path = path_from_name(path);
    o.world = world, o.rank = rank, o.transport = transport_from_name(transport), o.timeout_ms = timeout_ms;
    o.routed_rows_capacity = routed_rows_capacity;
    o.fp8_resident_weights = fp8_resident_weights;
    if (!all_gather.is_none()) {
      // Called from create() and recover() with the GIL released: take it for the Python call.
      o.all_gather = [all_gather](const std::vector<std::uint8_t>& mine) {
        nb::gil_scoped_acquire locked;
        nb::bytes got = nb::cast<nb::bytes>(all_gather(nb::bytes(mine.data(), mine.size())));
        const auto* p = static_cast<const std::uint8_t*>(got.data());
        return std::vector<std::uint8_t>(p, p + got.size());
      };
    }
    Config c = load_config(config);
    if (experts_per_rank > 0) c = with_experts(std::move(c), experts_per_rank * world);
    if (shared_experts >= 0) c = with_shared_experts(std::move(c), shared_experts, shared_expert_scale);
    nb::gil_scoped_release unlocked;
    runtime_ = Runtime::create(std::move(c), o);
  }

  // MXFP4 checkpoint tensors of `experts` experts, as host bytes; the biases (fp32, W1's rows as
  // halves) where the model has them. stage false: a layer's weights (experts_per_rank +
  // shared_experts of them); true: experts for replace_experts, any count.
  Weights load_mxfp4(int experts, bool stage, HostBytes w1_packed, HostBytes w1_scales, HostBytes w2_packed,
                        HostBytes w2_scales, OptionalFloats b1, OptionalFloats b2) {
    const ModelShape& m = runtime_->config().model;
    Mxfp4ExpertWeights w;
    w.experts = experts, w.model_dim = m.model_dim, w.inter_dim = m.inter_dim;
    w.w1_packed = copy_bytes(w1_packed), w.w1_scales = copy_bytes(w1_scales);
    w.w2_packed = copy_bytes(w2_packed), w.w2_scales = copy_bytes(w2_scales);
    return upload(with_biases(std::move(w), b1, b2), stage);
  }

  Weights load_fp32(int experts, bool stage, HostFloats w1, HostFloats w2, OptionalFloats b1, OptionalFloats b2) {
    const ModelShape& m = runtime_->config().model;
    check_count("w1", w1.size(), std::size_t(experts) * 2 * m.inter_dim * m.model_dim);
    check_count("w2", w2.size(), std::size_t(experts) * m.model_dim * m.inter_dim);
    return upload(
        with_biases(quantize_expert_weights(w1.data(), w2.data(), experts, m.model_dim, m.inter_dim), b1, b2), stage);
  }

  Weights load_bf16(int experts, bool stage, HostHalfWords w1, HostHalfWords w2, OptionalFloats b1,
                       OptionalFloats b2) {
    const ModelShape& m = runtime_->config().model;
    check_count("w1", w1.size(), std::size_t(experts) * 2 * m.inter_dim * m.model_dim);
    check_count("w2", w2.size(), std::size_t(experts) * m.model_dim * m.inter_dim);
    return upload(
        with_biases(quantize_expert_weights_bf16(w1.data(), w2.data(), experts, m.model_dim, m.inter_dim), b1, b2),
        stage);
  }

  // Copies staged experts into a layer's slots on `stream` (Runtime::replace_experts).
  void replace_experts(Weights& layer, const std::vector<int>& slots, const Weights& staged, std::uintptr_t stream) {
    runtime_->replace_experts(*mine("replace_experts", layer).weights, slots, *mine("replace_experts", staged).weights,
                              reinterpret_cast<StreamHandle>(stream));
  }

  void forward(const Weights& layer, std::uintptr_t x, std::uintptr_t ids, std::uintptr_t weights, std::uintptr_t y,
               std::int64_t tokens, std::uintptr_t stream) {
    runtime_->forward(*mine("forward", layer).weights, reinterpret_cast<const void*>(x),
                      reinterpret_cast<const int*>(ids), reinterpret_cast<const float*>(weights),
                      reinterpret_cast<void*>(y), tokens, reinterpret_cast<StreamHandle>(stream));
  }

  void prepare_tokens(std::int64_t tokens) {
    nb::gil_scoped_release unlocked;
    runtime_->prepare(tokens);
  }

  nb::dict take_errors() {
    CallErrors e;
    {
      nb::gil_scoped_release unlocked;
      e = runtime_->take_errors();
    }
    nb::dict d;
    d["bad_ids"] = e.bad_ids, d["first_bad_slot"] = e.first_bad_slot;
    d["bounds_violations"] = e.bounds_violations, d["dropped_rows"] = e.dropped_rows;
    return d;
  }

  void recover() {
    nb::gil_scoped_release unlocked;
    runtime_->recover();
  }

  nb::dict info() const {
    const Config& c = runtime_->config();
    nb::dict d;
    d["config"] = c.name, d["path"] = std::string(to_string(runtime_->path()));
    d["activation"] = std::string(to_string(c.activation.kind));
    d["path_note"] = runtime_->path_choice().note;
    const TableChoice& table = runtime_->table_choice();
    d["card"] = table.card;
    d["bucket_table"] = table.edited ? std::string("edited") : table_name(table.table);
    d["bucket_table_note"] = table.note;
    d["world"] = runtime_->world(), d["rank"] = runtime_->rank();
    d["max_tokens"] = runtime_->options().max_tokens, d["device"] = runtime_->options().device;
    d["experts"] = c.model.experts, d["experts_per_rank"] = c.model.experts_per_rank;
    d["logical_experts"] = c.model.logical_experts;
    d["model_dim"] = c.model.model_dim, d["inter_dim"] = c.model.inter_dim, d["topk"] = c.model.topk;
    d["expert_biases"] = c.model.expert_biases;
    d["shared_experts"] = c.model.shared_experts, d["shared_expert_scale"] = c.model.shared_expert_scale;
    return d;
  }

  // How the call of `tokens` tokens rounds (its bucket's): what an emulating reference repeats.
  nb::dict arithmetic(std::int64_t tokens) const {
    const PathArithmetic a = runtime_->arithmetic(tokens);
    const BucketConfig& b = runtime_->config().bucket_for_tokens(tokens);
    nb::dict d;
    d["x_block"] = a.x, d["h_block"] = a.h, d["h_static"] = a.h_static;
    d["model_dim"] = a.model_dim, d["inter_dim"] = a.inter_dim;  // the path's shape (padded)
    d["accumulation"] = a.accumulation == Accumulation::exact ? "exact" : "sm90_fp8_mma";
    d["combine_wire"] = std::string(to_string(b.combine_wire));
    return d;
  }

  nb::dict workspace_bytes() const { return workspace_dict(runtime_->workspace_bytes()); }
  bool capturing(std::uintptr_t stream) { return runtime_->device().capturing(reinterpret_cast<StreamHandle>(stream)); }
  void set_serial(bool serial) { runtime_->set_serial(serial); }

 private:
  static void check_count(const char* name, std::size_t got, std::size_t want) {
    if (got != want)
      throw Error("megamoe: load_weights: " + std::string(name) + " has " + std::to_string(got) +
                  " values, expected " + std::to_string(want));
  }
  // Both biases or neither; their sizes and values are checked by prepare_weights (check()).
  static Mxfp4ExpertWeights with_biases(Mxfp4ExpertWeights w, const OptionalFloats& b1, const OptionalFloats& b2) {
    if (b1.has_value() != b2.has_value())
      throw Error(std::string("megamoe: load_weights: ") + (b1 ? "b1" : "b2") + " given without " +
                  (b1 ? "b2" : "b1") + ", expected both biases or neither");
    if (b1) w.b1.assign(b1->data(), b1->data() + b1->size()), w.b2.assign(b2->data(), b2->data() + b2->size());
    return w;
  }
  Weights upload(const Mxfp4ExpertWeights& w, bool stage) {
    std::unique_ptr<PreparedWeights> p;
    {
      nb::gil_scoped_release unlocked;
      p = stage ? runtime_->prepare_replacement(w) : runtime_->prepare_weights(w);
    }
    return Weights{runtime_, std::move(p)};
  }
  // Weights prepared by another runtime have its layout and free through its device: refused.
  const Weights& mine(const char* what, const Weights& w) const {
    if (w.owner != runtime_)
      throw Error(std::string("megamoe: ") + what + ": weights loaded by another runtime, expected weights this "
                  "layer's runtime loaded (load_weights / stage_experts of a layer sharing it)");
    return w;
  }

  std::shared_ptr<Runtime> runtime_;  // shared with every Weights (their buffers free through its device)
};

}  // namespace
}  // namespace megamoe::python

NB_MODULE(_megamoe, m) {
  using namespace megamoe;
  using namespace megamoe::python;
  m.doc() = "megamoe's C++ library (use the megamoe package, not this module)";
  register_error_translation();

  m.def("builtin_configs", &builtin_config_names);
  m.def("builtin_config_text", [](const std::string& name) {  // a built-in config's JSON, as embedded
    for (const auto& f : embedded::configs())
      if (std::filesystem::path(f.path).stem().string() == name) return std::string(f.text);
    throw ConfigError::not_found(name, "built-in configs only");
  }, "name"_a);
  m.def("config_info", &config_info, "name"_a);
  m.def("cache_dir", [] { return DiskCache::default_root().string(); });
  m.def("gpu_available", [] {
    std::string why;
    bool ok = megamoe::gpu_available(BackendKind::cuda, &why);
    return nb::make_tuple(ok, why);
  });
  m.def("version", [] { return std::string(MEGAMOE_PYTHON_VERSION); });
  m.def("tensor_info", &tensor_info, "array"_a);
  m.def("quantize_mxfp4", &quantize_mxfp4, "values"_a);
  m.def("checkpoint_to_halves", &checkpoint_to_halves_py, "layout"_a, "experts"_a, "model_dim"_a, "inter_dim"_a,
        "arrays"_a);
  m.def("check_checkpoint", &check_checkpoint_py, "layout"_a, "experts"_a, "model_dim"_a, "inter_dim"_a, "arrays"_a);
  m.def("dequantize_mxfp4", &dequantize_mxfp4, "packed"_a, "scales"_a);
  m.def("tune", &run_tuner, "config"_a, "out"_a, "start"_a, "buckets"_a, "minutes"_a, "journal"_a, "pairs"_a, "min_gain"_a,
        "fp8_resident"_a, "fp8_wire"_a, "search_modes"_a, "modes"_a, "seed"_a, "jobs"_a, "world"_a, "transport"_a, "table"_a,
        "progress"_a.none());
  m.def("workspace_bytes", &planned_workspace_bytes, "config"_a, "max_tokens"_a, "world"_a, "path"_a, "arch"_a,
        "routed_rows_capacity"_a, "fp8_resident_weights"_a, "experts_per_rank"_a, "redundant_experts"_a,
        "shared_experts"_a, "shared_expert_scale"_a, "transport"_a, "node_size"_a, "bucket_table"_a);
  m.def("precompile", &precompile, "config"_a, "buckets"_a, "arch"_a, "path"_a, "world"_a, "jobs"_a, "shared_experts"_a,
        "table"_a, "progress"_a.none());

  nb::class_<Weights>(m, "Weights")
      .def_prop_ro("experts", [](const Weights& w) { return w.weights->experts; })
      .def_prop_ro("flushed_blocks", [](const Weights& w) { return w.weights->flushed_blocks; })
      .def_prop_ro("flushed_w1", [](const Weights& w) { return w.weights->flushed_w1; })
      .def_prop_ro("flushed_w2", [](const Weights& w) { return w.weights->flushed_w2; })
      .def_prop_ro("resident_bytes", [](const Weights& w) { return w.weights->resident_bytes; })
      .def_prop_ro("bytes", [](const Weights& w) { return w.weights->bytes(); });

  nb::class_<PyRuntime>(m, "Runtime")
      .def(nb::init<const std::string&, int, int, const std::string&, int, int, const std::string&, int, nb::object,
                    long long, bool, int, int, int, float, int, const std::string&>(),
           "config"_a, "max_tokens"_a, "device"_a, "path"_a, "world"_a, "rank"_a, "transport"_a, "timeout_ms"_a,
           "all_gather"_a.none(), "routed_rows_capacity"_a, "fp8_resident_weights"_a, "experts_per_rank"_a,
           "redundant_experts"_a, "shared_experts"_a, "shared_expert_scale"_a, "node_size"_a, "bucket_table"_a)
      .def("load_mxfp4", &PyRuntime::load_mxfp4, "experts"_a, "stage"_a, "w1_packed"_a, "w1_scales"_a, "w2_packed"_a,
           "w2_scales"_a, "b1"_a = nb::none(), "b2"_a = nb::none())
      .def("load_fp32", &PyRuntime::load_fp32, "experts"_a, "stage"_a, "w1"_a, "w2"_a, "b1"_a = nb::none(),
           "b2"_a = nb::none())
      .def("load_bf16", &PyRuntime::load_bf16, "experts"_a, "stage"_a, "w1"_a, "w2"_a, "b1"_a = nb::none(),
           "b2"_a = nb::none())
      .def("replace_experts", &PyRuntime::replace_experts, "layer"_a, "slots"_a, "staged"_a, "stream"_a)
      .def("forward", &PyRuntime::forward, "layer"_a, "x"_a, "ids"_a, "weights"_a, "y"_a, "tokens"_a, "stream"_a)
      .def("prepare", &PyRuntime::prepare_tokens, "tokens"_a)
      .def("take_errors", &PyRuntime::take_errors)
      .def("recover", &PyRuntime::recover)
      .def("info", &PyRuntime::info)
      .def("arithmetic", &PyRuntime::arithmetic, "tokens"_a)
      .def("set_serial", &PyRuntime::set_serial)
      .def("workspace_bytes", &PyRuntime::workspace_bytes)
      .def("capturing", &PyRuntime::capturing, "stream"_a);
}
