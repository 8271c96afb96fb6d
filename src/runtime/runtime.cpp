#include "megamoe/runtime.hpp"

#include <algorithm>

#include "codegen/kernel_catalog.hpp"
#include "jit/kernel_builder.hpp"

namespace megamoe {

struct Runtime::LoadedKernel {
  std::shared_ptr<const BuiltKernel> built;
  std::unique_ptr<Module> module;
  void* function = nullptr;
};

Runtime::Runtime(Config config, std::unique_ptr<Device> device)
    : config_(std::move(config)), device_(std::move(device)) {}
Runtime::~Runtime() = default;

std::unique_ptr<Runtime> Runtime::create(std::string_view config_name, RuntimeOptions options) {
  Config config = load_config(config_name);
  return std::unique_ptr<Runtime>(new Runtime(std::move(config), open_device(options.backend, options.device)));
}

const Runtime::LoadedKernel& Runtime::kernels_for(std::int64_t tokens) {
  const BucketConfig& bucket = config_.bucket_for_tokens(tokens);
  auto& slot = loaded_[bucket.bucket];
  if (!slot) {
    KernelBuilder& builder = shared_kernel_builder(device_->kind(), device_->arch());
    auto specs = kernels_for_bucket(config_, bucket);
    auto k = std::make_unique<LoadedKernel>();
    k->built = builder.build(specs.front()).kernel;
    k->module = device_->load_module(k->built->binary);
    k->function = k->module->function(k->built->symbol);
    slot = std::move(k);
  }
  return *slot;
}

void Runtime::prepare(std::int64_t tokens) { kernels_for(tokens); }

void Runtime::activation(const float* gate_up, float* out, std::int64_t tokens, int row_capacity, int* error,
                         StreamHandle stream) {
  const LoadedKernel& k = kernels_for(tokens);
  const BucketConfig& b = config_.bucket_for_tokens(tokens);
  int rows = int(tokens), cols = config_.model.inter_dim;
  if (rows == 0) return;
  long tiles = long((rows + b.stage1.bm - 1) / b.stage1.bm) * ((cols + b.stage1.bn - 1) / b.stage1.bn);
  unsigned grid = unsigned(std::min<long>(tiles, 4L * device_->multiprocessors()));
  void* args[] = {&gate_up, &out, &rows, &cols, &row_capacity, &error};
  device_->launch(k.function, {grid}, {unsigned(k.built->threads)}, 0, stream, args);
}

}  // namespace megamoe
