// FKV_HOST_DEVICE: marks the header-only numeric codecs callable from host C++ and from CUDA device code.
//
// The headers of include/flashkv/numeric/ are compiled twice: by the host compiler (C++20) for the CPU
// backend and the tests, and by nvcc (C++17) inside kernels, so a record written on one side decodes
// bit-identically on the other. They use nothing that either side lacks: no exceptions, no allocation,
// no fmt, no std::bit_cast on the device.
#pragma once

#if defined(__CUDACC__)
#define FKV_HOST_DEVICE __host__ __device__
#else
#define FKV_HOST_DEVICE
#endif
