# cuda_trainer: built only when CUDA was detected (CKPT_HAVE_CUDA).
# Included from the top-level CMakeLists.txt inside if(CKPT_EXAMPLES).
if(CKPT_HAVE_CUDA AND CKPT_SANITIZE)
  # The sanitizer flags are added for every language and nvcc rejects them.
  message(STATUS "ckpt: sanitizer build: cuda_trainer not built")
elseif(CKPT_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # The build machine may have no GPU, so "native" cannot be relied on:
    # SASS for A100 (sm_80) and H100/H200 (sm_90), plus compute_90 PTX that
    # newer GPUs compile at load time. Override with -DCMAKE_CUDA_ARCHITECTURES.
    set(CMAKE_CUDA_ARCHITECTURES "80-real;90")
  endif()
  enable_language(CUDA)
  add_executable(cuda_trainer examples/cuda_trainer/cuda_trainer.cu)
  # The project's warning flags are host-compiler flags: hand them to nvcc's
  # host compiler instead of to nvcc itself.
  set(_host_warnings -Xcompiler=-Wall,-Wextra)
  if(CKPT_WERROR)
    set(_host_warnings ${_host_warnings},-Werror)
  endif()
  set_property(TARGET cuda_trainer PROPERTY COMPILE_OPTIONS ${_host_warnings} -D_GNU_SOURCE)
  # The shared runtime: the one libckpt loads with dlopen is then this same
  # library, not a second copy.
  set_target_properties(cuda_trainer PROPERTIES CUDA_RUNTIME_LIBRARY Shared CUDA_STANDARD 17
    CUDA_STANDARD_REQUIRED ON)
  target_link_libraries(cuda_trainer PRIVATE ckpt)
endif()
