//===- hd.h - Functions compiled for host and device ------------*- C++ -*-===//
//
// What a CUDA kernel computes per element or per row lives in a
// TESSEL_HD function, so the host tests (compiled by the C++ compiler, no
// GPU) check the same arithmetic the device runs.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CORE_HD_H
#define TESSEL_RUNTIME_CORE_HD_H

#ifdef __CUDACC__
#define TESSEL_HD __host__ __device__ __forceinline__
#else
#define TESSEL_HD inline
#endif

#endif // TESSEL_RUNTIME_CORE_HD_H
