// A Device whose memory is host memory, for CPU tests of what the runtime uploads
// (prepare_weights, replace_experts' copies). It runs no kernel: everything else throws.
#pragma once
#include <cstring>
#include <stdexcept>

#include "megamoe/device.hpp"

namespace megamoe::test {

class HostMemoryDevice final : public Device {
 public:
  BackendKind kind() const override { return BackendKind::cuda; }
  std::string name() const override { return "host memory"; }
  std::string arch() const override { return "sm_90a"; }
  int multiprocessors() const override { return 132; }
  int ordinal() const override { return 0; }

  void* alloc(std::size_t bytes) override { return new unsigned char[bytes ? bytes : 1]; }
  void free(void* ptr) override { delete[] static_cast<unsigned char*>(ptr); }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void fill_bytes(void* dst, unsigned char value, std::size_t bytes) override { std::memset(dst, value, bytes); }
  void copy_device_async(void* dst, const void* src, std::size_t bytes, StreamHandle) override {
    std::memcpy(dst, src, bytes);
  }

  std::unique_ptr<Module> load_module(std::string_view) override { none("load_module"); }
  void launch(void*, Dim3, Dim3, std::size_t, StreamHandle, void**, bool) override { none("launch"); }
  std::string ipc_handle(void*) override { none("ipc_handle"); }
  void* open_ipc_handle(const std::string&) override { none("open_ipc_handle"); }
  void close_ipc_handle(void*) override { none("close_ipc_handle"); }
  bool can_access_peer(const Device&) override { return false; }
  void enable_peer_access(const Device&) override { none("enable_peer_access"); }
  StreamHandle create_stream() override { return nullptr; }
  void destroy_stream(StreamHandle) override {}
  void synchronize(StreamHandle) override {}
  EventHandle create_event() override { none("create_event"); }
  void destroy_event(EventHandle) override {}
  void record(EventHandle, StreamHandle) override { none("record"); }
  float elapsed_ms(EventHandle, EventHandle) override { none("elapsed_ms"); }
  void begin_capture(StreamHandle) override { none("begin_capture"); }
  bool capturing(StreamHandle) override { return false; }
  GraphHandle end_capture(StreamHandle) override { none("end_capture"); }
  void launch_graph(GraphHandle, StreamHandle) override { none("launch_graph"); }
  void destroy_graph(GraphHandle) override {}

 private:
  [[noreturn]] static void none(const char* what) {
    throw std::logic_error(std::string("HostMemoryDevice runs no kernel: ") + what);
  }
};

}  // namespace megamoe::test
