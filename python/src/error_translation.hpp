// C++ exceptions of megamoe raise the Python exceptions of python/megamoe/errors.py of the same
// names (ConfigError, CompileError, DeviceError, NoGpuError, PeerTimeoutError; Error for the
// rest), with the C++ message and the fields that each carries.
#pragma once

namespace megamoe::python {

void register_error_translation();

}  // namespace megamoe::python
