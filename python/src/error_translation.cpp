#include "error_translation.hpp"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "megamoe/errors.hpp"

namespace nb = nanobind;

namespace megamoe::python {

namespace {
// Raises megamoe.errors.<name>(message, **fields).
void raise(const char* name, const char* message, nb::kwargs fields = {}) {
  nb::object cls = nb::module_::import_("megamoe.errors").attr(name);
  nb::object error = cls(message, **fields);
  PyErr_SetObject(cls.ptr(), error.ptr());
}
}  // namespace

void register_error_translation() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      nb::kwargs f;
      f["file"] = e.file, f["json_path"] = e.json_path, f["value"] = e.value, f["expected"] = e.expected;
      raise("ConfigError", e.what(), f);
    } catch (const InputError& e) {  // Python's InputError writes its message from the three
      nb::object cls = nb::module_::import_("megamoe.errors").attr("InputError");
      nb::object error = cls(e.field, e.value, e.expected);
      PyErr_SetObject(cls.ptr(), error.ptr());
    } catch (const CompileError& e) {
      nb::kwargs f;
      f["kernel_name"] = e.kernel_name, f["key"] = e.key, f["options"] = nb::cast(e.options);
      f["log"] = e.log, f["source_path"] = e.source_path;
      raise("CompileError", e.what(), f);
    } catch (const PeerTimeoutError& e) {
      nb::kwargs f;
      f["rank"] = e.rank, f["peer"] = e.peer, f["phase"] = e.phase, f["timeout_ms"] = e.timeout_ms;
      raise("PeerTimeoutError", e.what(), f);
    } catch (const NoGpuError& e) {
      raise("NoGpuError", e.what());
    } catch (const DeviceError& e) {
      raise("DeviceError", e.what());
    } catch (const Error& e) {
      raise("Error", e.what());
    }
  });
}

}  // namespace megamoe::python
