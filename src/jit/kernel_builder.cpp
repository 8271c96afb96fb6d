#include "jit/kernel_builder.hpp"

#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <vector>

#include "backend/cuda/nvshmem_library.hpp"
#include "jit/hash.hpp"
#include "megamoe/errors.hpp"

namespace megamoe {

std::string_view to_string(BuildOrigin origin) {
  switch (origin) {
    case BuildOrigin::memory: return "hit (memory)";
    case BuildOrigin::disk: return "hit";
    case BuildOrigin::compiled: return "compiled";
  }
  return "?";
}

KernelBuilder::KernelBuilder(std::shared_ptr<const Compiler> compiler, std::string arch,
                             std::filesystem::path cache_root)
    : compiler_(std::move(compiler)), arch_(std::move(arch)), cache_(std::move(cache_root)) {
  compiler_->check_arch(arch_);
  compiler_identity_ = compiler_->identity();
}

namespace {
// What a kernel that links NVSHMEM adds to its key: the linker, NVSHMEM's version, the device
// library's and the shim's bytes (hashed, so the same library gives the same key wherever it is
// installed). Read once a process.
const std::vector<std::string>& nvshmem_key_parts(const Compiler& compiler, const Nvshmem& shmem) {
  static std::mutex mutex;
  static std::vector<std::string> parts;
  std::lock_guard lock(mutex);
  if (parts.empty()) {
    std::ifstream f(shmem.device_library(), std::ios::binary);
    const std::string library((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (!f.good() && !f.eof()) throw Error("megamoe: cannot read " + shmem.device_library());
    parts = {"link: " + compiler.linker_identity(), "with: " + shmem.version(),
             "device library: " + hash128_hex(library), "shim: " + hash128_hex(shmem.shim_object())};
  }
  return parts;
}
}  // namespace

PlannedKernel KernelBuilder::plan(const KernelSpec& spec) const {
  PlannedKernel p;
  p.rendered = render(spec);
  p.options = compiler_->options_for(arch_);
  std::vector<std::string> link_parts;
  if (spec.nvshmem) {  // NVSHMEM's device library linked in, and named in the key
    const Nvshmem& shmem = Nvshmem::get();
    for (const std::string& o : compiler_->link_options()) p.options.push_back(o);
    p.options.push_back("-DMEGAMOE_NVSHMEM=1");
    p.link.objects = {shmem.shim_object()};
    p.link.libraries = {shmem.device_library()};
    link_parts = nvshmem_key_parts(*compiler_, shmem);
  }
  CacheKeyParts parts;
  parts.name = p.rendered.name;
  parts.compiler = compiler_identity_;
  parts.arch = arch_;
  parts.options = p.options;
  parts.options.insert(parts.options.end(), link_parts.begin(), link_parts.end());
  parts.source = p.rendered.source;
  parts.headers = p.rendered.headers;
  p.key = make_cache_key(parts);
  return p;
}

BuildReport KernelBuilder::build(const PlannedKernel& p) {
  auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  std::shared_ptr<Slot> slot;
  {
    std::lock_guard lock(slots_mutex_);
    auto& s = slots_[p.key.hex];
    if (!s) s = std::make_shared<Slot>();
    slot = s;
  }
  std::lock_guard lock(slot->mutex);
  if (slot->kernel) return {slot->kernel, BuildOrigin::memory, seconds()};

  auto make = [&](std::string binary) {
    auto k = std::make_shared<BuiltKernel>();
    k->key = p.key;
    k->symbol = p.rendered.name;
    k->binary = std::move(binary);
    k->threads = p.rendered.threads;
    return k;
  };

  if (auto binary = cache_.load(p.key)) {
    slot->kernel = make(std::move(*binary));
    return {slot->kernel, BuildOrigin::disk, seconds()};
  }

  CompileInput in{p.rendered.name, p.rendered.source, p.rendered.headers, p.options, p.link};
  CompileOutput out = compiler_->compile(in);
  if (!out.ok) {
    auto path = cache_.save_failed_source(p.key, p.rendered.source);
    throw CompileError(p.rendered.name, p.key.hex, p.options, out.log, path.string());
  }
  CacheEntryContents contents;
  contents.binary = out.binary;
  contents.binary_suffix = compiler_->binary_suffix();
  contents.source = p.rendered.source;
  contents.compiler = compiler_identity_;
  contents.arch = arch_;
  contents.options = p.options;
  for (auto& h : p.rendered.headers) contents.header_paths.push_back(h.path);
  contents.compile_seconds = seconds();
  cache_.publish(p.key, contents);  // a lost race or an unwritable cache leaves our copy valid
  slot->kernel = make(std::move(out.binary));
  return {slot->kernel, BuildOrigin::compiled, seconds()};
}

KernelBuilder& shared_kernel_builder(BackendKind backend, const std::string& arch) {
  static std::mutex mutex;
  static std::map<std::pair<BackendKind, std::string>, std::unique_ptr<KernelBuilder>> builders;
  std::lock_guard lock(mutex);
  auto& b = builders[{backend, arch}];
  if (!b) b = std::make_unique<KernelBuilder>(make_compiler(backend), arch, DiskCache::default_root());
  return *b;
}

}  // namespace megamoe
