# tests/trainers.cmake -- the example trainers' exit status
# (tests/integration/test_trainer_exit.sh); include()d from
# tests/CMakeLists.txt.
#   trainer_exit_c     c_trainer exits 74 when its final save did not commit
#                      (a fenced lease epoch), 0 once it did
#   trainer_exit_mpi   the same for mpi_trainer on 2 ranks (mpirun; nosan)
#   trainer_exit_cuda  the same for cuda_trainer (label cuda; skipped, exit
#                      77, without a usable device)
if(NOT TARGET ckptrun OR NOT TARGET c_trainer)
  return()
endif()
add_test(NAME trainer_exit_c
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/integration/test_trainer_exit.sh c)
set_tests_properties(trainer_exit_c PROPERTIES LABELS integration TIMEOUT 120
  ENVIRONMENT "${CKPT_TEST_ENV}")
if(TARGET mpi_trainer)
  add_test(NAME trainer_exit_mpi
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/integration/test_trainer_exit.sh mpi)
  set_tests_properties(trainer_exit_mpi PROPERTIES LABELS "integration;nosan" TIMEOUT 180
    SKIP_RETURN_CODE 77 ENVIRONMENT "${CKPT_TEST_ENV}")
endif()
if(TARGET cuda_trainer)
  add_test(NAME trainer_exit_cuda
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/integration/test_trainer_exit.sh cuda)
  set_tests_properties(trainer_exit_cuda PROPERTIES LABELS cuda SKIP_RETURN_CODE 77 TIMEOUT 180
    ENVIRONMENT "${CKPT_TEST_ENV}")
endif()
