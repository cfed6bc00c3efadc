# CUDA tests, label `cuda` (included by tests/CMakeLists.txt).
# test_cuda_nodriver runs in every build, GPU or not: no CUDA runtime can be
# loaded (CKPT_CUDA_RUNTIME points nowhere), device regions are refused and
# host regions still work. The device tests exist only when CUDA was
# detected, and exit 77 (shown by ctest as skipped, with the reason in the
# test's output) on a machine without a GPU. tests/gpu/run.sh runs them all.
add_executable(test_cuda_nodriver unit/test_cuda_nodriver.c)
target_link_libraries(test_cuda_nodriver PRIVATE ckpt_internal PkgConfig::CMOCKA ${CMAKE_DL_LIBS})
add_dependencies(test_cuda_nodriver ckpt) # it dlopens libckpt.so
add_test(NAME test_cuda_nodriver COMMAND test_cuda_nodriver)
set_tests_properties(test_cuda_nodriver PROPERTIES LABELS "unit;cuda" TIMEOUT 300
  ENVIRONMENT "${CKPT_TEST_ENV};CKPT_CUDA_RUNTIME=/nonexistent/libcudart.so")

if(CKPT_HAVE_CUDA)
  # cuda.c's real code against a fake runtime: runs on every machine.
  add_library(fake_cudart SHARED tools/fake_cudart.c)
  target_link_libraries(fake_cudart PRIVATE Threads::Threads)
  set_target_properties(fake_cudart PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_executable(test_cuda_fake unit/test_cuda_fake.c)
  target_link_libraries(test_cuda_fake PRIVATE ckpt_internal PkgConfig::CMOCKA ${CMAKE_DL_LIBS})
  add_dependencies(test_cuda_fake fake_cudart)
  add_test(NAME test_cuda_fake COMMAND test_cuda_fake)
  set_tests_properties(test_cuda_fake PROPERTIES LABELS "unit;cuda" SKIP_RETURN_CODE 77
    TIMEOUT 300 ENVIRONMENT "${CKPT_TEST_ENV};CKPT_CUDA_RUNTIME=$<TARGET_FILE:fake_cudart>;CKPT_CUDA_COPY_THREADS=3")

  add_executable(test_cuda unit/test_cuda.c)
  target_link_libraries(test_cuda PRIVATE ckpt_internal PkgConfig::CMOCKA CUDA::cudart)
  add_test(NAME test_cuda COMMAND test_cuda)
  set_tests_properties(test_cuda PROPERTIES LABELS cuda SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "${CKPT_TEST_ENV}")
  if(CKPT_SANITIZE)
    # CUDA's runtime and ASan disagree about the address space (shadow gap);
    # `make test-asan` leaves out `nosan` tests.
    set_tests_properties(test_cuda PROPERTIES LABELS "cuda;nosan")
  endif()
  if(TARGET cuda_trainer)
    add_test(NAME cuda_trainer_kill_resume
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cuda_trainer_kill.sh)
    set_tests_properties(cuda_trainer_kill_resume PROPERTIES LABELS cuda SKIP_RETURN_CODE 77
      TIMEOUT 600 ENVIRONMENT "${CKPT_TEST_ENV}")
  endif()
endif()
