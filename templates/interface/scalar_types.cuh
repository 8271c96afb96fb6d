// The integer types of the kernels' arguments and templates. Plain C++: the host compiler
// includes this too (through interface/kernel_args.cuh), so both sides spell a field's type alike.
#pragma once

namespace megamoe {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef int i32;
typedef long long i64;

}  // namespace megamoe
