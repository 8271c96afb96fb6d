// The disk cache: miss, publish, hit; corrupt entries detected, moved aside and recompiled
// with one warning; an unwritable folder falls back to memory with one warning; the
// environment picks the folder.
#include <catch2/catch.hpp>

#include <filesystem>

#include "codegen/kernel_paths.hpp"
#include "codegen/layer_kernels.hpp"
#include "config/tile_sizes.hpp"
#include "jit/kernel_builder.hpp"
#include "megamoe/errors.hpp"
#include "support/test_support.hpp"

using namespace megamoe;
namespace fs = std::filesystem;

namespace {

// A small, quick-to-compile kernel; bm picks between distinct ones.
KernelSpec spec(int bm = 64) { return bm == 64 ? combine_spec(CombineWire::bf16) : combine_spec(CombineWire::fp8_blockwise_1x32); }

std::unique_ptr<KernelBuilder> builder(const fs::path& root) {
  return std::make_unique<KernelBuilder>(make_compiler(BackendKind::cuda), "sm_90a", root);
}

std::size_t count_entries(const fs::path& dir) {
  if (!fs::exists(dir)) return 0;
  std::size_t n = 0;
  for (auto& e : fs::directory_iterator(dir)) n += e.path().filename().string()[0] != '.';
  return n;
}

}  // namespace

TEST_CASE("a miss compiles and publishes; a new process-equivalent builder hits", "[jit][cache]") {
  test::TempDir dir;
  BuildReport first = builder(dir.path())->build(spec());
  CHECK(first.origin == BuildOrigin::compiled);
  REQUIRE(first.kernel->binary.size() > 4);
  CHECK(first.kernel->binary.substr(0, 4) == "\x7f" "ELF");

  auto b = builder(dir.path());
  fs::path entry = b->cache().entry_dir(first.kernel->key);
  CHECK(fs::exists(entry / "manifest.json"));
  CHECK(fs::exists(entry / "kernel.cubin"));
  CHECK(test::read_text(entry / "kernel.cu") == b->plan(spec()).rendered.source);
  CHECK(count_entries(dir.path() / "v1") == 1);
  CHECK(count_entries(dir.path() / "v1" / ".tmp") == 0);

  BuildReport second = b->build(spec());
  CHECK(second.origin == BuildOrigin::disk);
  CHECK(second.kernel->binary == first.kernel->binary);
  CHECK(b->build(spec()).origin == BuildOrigin::memory);
}

TEST_CASE("corrupt cache entries are moved aside and recompiled with one warning", "[jit][cache]") {
  using Corruption = std::function<void(const fs::path&)>;
  std::vector<std::pair<std::string, Corruption>> cases = {
      {"truncated binary", [](const fs::path& e) { fs::resize_file(e / "kernel.cubin", 100); }},
      {"flipped binary byte",
       [](const fs::path& e) {
         std::string b = test::read_text(e / "kernel.cubin");
         b[b.size() / 2] ^= 1;
         test::write_text(e / "kernel.cubin", b);
       }},
      {"missing manifest", [](const fs::path& e) { fs::remove(e / "manifest.json"); }},
      {"garbage manifest", [](const fs::path& e) { test::write_text(e / "manifest.json", "{not json"); }},
      {"truncated manifest",
       [](const fs::path& e) {
         std::string m = test::read_text(e / "manifest.json");
         test::write_text(e / "manifest.json", m.substr(0, m.size() / 2));
       }},
      {"manifest of another key",
       [](const fs::path& e) {
         std::string m = test::read_text(e / "manifest.json");
         auto at = m.find("\"key\": \"") + 8;
         m[at] = m[at] == '0' ? '1' : '0';
         test::write_text(e / "manifest.json", m);
       }},
      {"missing binary", [](const fs::path& e) { fs::remove(e / "kernel.cubin"); }},
  };
  for (auto& [what, corrupt] : cases) {
    SECTION(what) {
      test::TempDir dir;
      BuildReport good = builder(dir.path())->build(spec());
      fs::path entry = builder(dir.path())->cache().entry_dir(good.kernel->key);
      corrupt(entry);

      test::CapturedWarnings warnings;
      auto b = builder(dir.path());
      BuildReport again = b->build(spec());
      CHECK(again.origin == BuildOrigin::compiled);
      CHECK(again.kernel->binary == good.kernel->binary);
      REQUIRE(warnings.messages.size() == 1);
      CHECK_THAT(warnings.messages[0], Catch::Contains("corrupt") && Catch::Contains("moved to"));
      CHECK(count_entries(dir.path() / "v1" / ".corrupt") == 1);
      // The recompiled entry is intact: a fresh builder hits it without a warning.
      BuildReport third = builder(dir.path())->build(spec());
      CHECK(third.origin == BuildOrigin::disk);
      CHECK(warnings.messages.size() == 1);
    }
  }
}

TEST_CASE("an unwritable cache folder falls back to memory with one warning", "[jit][cache]") {
  test::TempDir dir;
  // Below a regular file nothing can be created, also for root (who ignores permissions).
  test::write_text(dir.path() / "file", "x");
  test::CapturedWarnings warnings;
  auto b = builder(dir.path() / "file" / "cache");
  BuildReport one = b->build(spec(64));
  BuildReport two = b->build(spec(32));
  CHECK(one.origin == BuildOrigin::compiled);
  CHECK(two.origin == BuildOrigin::compiled);
  CHECK(b->build(spec(64)).origin == BuildOrigin::memory);
  REQUIRE(warnings.messages.size() == 1);
  CHECK_THAT(warnings.messages[0], Catch::Contains("not writable") && Catch::Contains("memory"));
  CHECK_FALSE(b->cache().writable());
}

TEST_CASE("a disabled cache keeps kernels in memory only, silently", "[jit][cache]") {
  test::CapturedWarnings warnings;
  auto b = builder({});
  CHECK(b->build(spec()).origin == BuildOrigin::compiled);
  CHECK(b->build(spec()).origin == BuildOrigin::memory);
  CHECK(warnings.messages.empty());
}

TEST_CASE("the cache folder comes from the environment", "[jit][cache]") {
  test::ScopedEnv disable("MEGAMOE_DISABLE_CACHE", std::nullopt);
  {
    test::ScopedEnv dir("MEGAMOE_CACHE_DIR", "/some/where");
    CHECK(DiskCache::default_root() == "/some/where");
  }
  test::ScopedEnv no_dir("MEGAMOE_CACHE_DIR", std::nullopt);
  {
    test::ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    CHECK(DiskCache::default_root() == "/xdg/megamoe");
  }
  test::ScopedEnv no_xdg("XDG_CACHE_HOME", std::nullopt);
  test::ScopedEnv home("HOME", "/home/u");
  CHECK(DiskCache::default_root() == "/home/u/.cache/megamoe");
  test::ScopedEnv off("MEGAMOE_DISABLE_CACHE", "1");
  CHECK(DiskCache::default_root().empty());
}

TEST_CASE("a compile error carries the name, key, options, log and saved source", "[jit][cache]") {
  test::TempDir dir;
  KernelSpec bad = spec();
  bad.function = "this_is_not_declared";
  auto b = builder(dir.path());
  PlannedKernel planned = b->plan(bad);
  try {
    b->build(planned);
    FAIL("a broken kernel compiled");
  } catch (const CompileError& e) {
    CHECK(e.kernel_name == "megamoe_combine_bf16");
    CHECK(e.key == planned.key.hex);
    CHECK(e.options == b->compiler().options_for("sm_90a"));
    CHECK_THAT(e.log, Catch::Contains("this_is_not_declared"));
    REQUIRE(fs::exists(e.source_path));
    CHECK(test::read_text(e.source_path) == planned.rendered.source);
    CHECK_THAT(std::string(e.what()), Catch::Contains(e.source_path) && Catch::Contains("this_is_not_declared"));
  }
  CHECK_FALSE(fs::exists(b->cache().entry_dir(planned.key)));  // nothing published
}
