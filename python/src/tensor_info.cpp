#include "tensor_info.hpp"

#include <string>

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

namespace nb = nanobind;

namespace megamoe::python {

namespace {
std::string dtype_name(nb::dlpack::dtype t) {
  using code = nb::dlpack::dtype_code;
  std::string base;
  switch (code(t.code)) {
    case code::Int: base = "int"; break;
    case code::UInt: base = "uint"; break;
    case code::Float: base = "float"; break;
    case code::Bfloat: base = "bfloat"; break;
    case code::Bool: return "bool";
    default: base = "code" + std::to_string(t.code) + "_"; break;
  }
  std::string name = base + std::to_string(t.bits);
  return t.lanes == 1 ? name : name + "x" + std::to_string(t.lanes);
}

const char* device_name(int type) {
  switch (type) {
    case nb::device::cpu::value: return "cpu";
    case nb::device::cuda::value: return "cuda";
    case nb::device::cuda_host::value: return "cuda_host";
    case nb::device::cuda_managed::value: return "cuda_managed";
    case nb::device::rocm::value: return "rocm";
    default: return "other";
  }
}
}  // namespace

nb::tuple tensor_info(nb::handle array) {
  nb::ndarray<nb::ro> a;
  if (!nb::try_cast(array, a, false))
    throw nb::type_error("megamoe: expected an array with __dlpack__ (or the buffer protocol)");
  nb::list shape, strides;
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    shape.append(a.shape(i));
    strides.append(a.stride(i));
  }
  auto as_tuple = [](const nb::list& l) { return nb::steal<nb::tuple>(PySequence_Tuple(l.ptr())); };
  return nb::make_tuple(reinterpret_cast<std::uintptr_t>(a.data()), as_tuple(shape), as_tuple(strides),
                        dtype_name(a.dtype()), device_name(a.device_type()), a.device_id());
}

}  // namespace megamoe::python
