// The limits and sizes the kernels and the host agree on (templates/interface/kernel_constants.cuh:
// the largest world, the weight layout's units, the Hopper tiles, the dispatch strides), for host
// code outside the library: the tools read them here rather than from the device code's folder.
#pragma once
#include "interface/kernel_constants.cuh"
