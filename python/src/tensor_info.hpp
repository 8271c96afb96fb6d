// What megamoe reads of an array handed to it through DLPack (any object with __dlpack__, or a
// buffer): its address, shape, strides, element type and device. Python checks them
// (python/megamoe/_tensors.py) before a call; the call takes addresses only.
#pragma once
#include <nanobind/nanobind.h>

namespace megamoe::python {

// A tuple (data, shape, strides, dtype, device_type, device_id): strides in elements; dtype a
// name such as "float32", "bfloat16", "uint8", "int32"; device_type "cpu", "cuda" or "rocm".
nanobind::tuple tensor_info(nanobind::handle array);

}  // namespace megamoe::python
