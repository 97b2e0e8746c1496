//===- comm_nccl.cu - NCCL communicators per mesh axes ------------------===//
//
// PLACEHOLDER: not yet written.
//
//===----------------------------------------------------------------------===//

#include "cuda/backend.h"

using namespace tessel;
using namespace tessel::cuda;

std::unique_ptr<Communicator>
CudaBackend::createCommunicator(tessel_ctx *, const tessel_ctx_options &options,
                                std::string &error) {
  if (options.comm != TESSEL_COMM_NONE)
    error = "tessel_ctx_create: the cuda backend's NCCL communicator is not "
            "built yet";
  return nullptr;
}
