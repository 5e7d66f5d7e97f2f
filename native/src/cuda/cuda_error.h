// How a CUDA error reads in the decoder's messages ("what: cudaErrorName
// (description)"): one helper shared by the decoder's files, the device
// queries and the backend table.
#pragma once
#include <string>

#include <cuda_runtime_api.h>

namespace guild::cuda {

inline std::string cuda_msg(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

}  // namespace guild::cuda
