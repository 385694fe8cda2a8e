#include "flashinfer/comm/trtllm_allreduce_fusion.cuh"
#include "flashinfer/comm/trtllm_allreduce.cuh"
namespace fa = flashinfer::trtllm_allreduce_fusion;
template cudaError_t fa::allreduce_fusion_op<__nv_bfloat16>(fa::AllReduceFusionParams<__nv_bfloat16> const&, bool, bool);
namespace ta = flashinfer::trtllm_allreduce;
template cudaError_t ta::customAllReduce<__nv_bfloat16>(ta::AllReduceParams<__nv_bfloat16>&, ta::AllReduceStrategyType,
                                                        ta::AllReduceStrategyConfig, ta::AllReduceFusionOp, bool,
                                                        cudaStream_t);
