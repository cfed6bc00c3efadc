# cuda_bench: device snapshot vs plain CUDA copies (never run by ctest;
# bench/run_cuda.sh and tests/gpu/run.sh run it). Only with CUDA detected.
if(CKPT_HAVE_CUDA)
  add_executable(cuda_bench cuda_bench.c)
  target_link_libraries(cuda_bench PRIVATE ckpt CUDA::cudart)
endif()
