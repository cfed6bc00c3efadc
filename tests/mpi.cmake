# tests/mpi.cmake -- multi-rank checkpoints over MPI; include()d from
# tests/CMakeLists.txt. Only when CMake found MPI (mpi_trainer is built);
# the script itself exits 77 (skip, with the reason) when mpirun is missing.
#   mpi_integration  tests/integration/test_mpi.py Stop RankKilled WorldSize Trials:
#                    ckptrun over `mpirun -np 4` mpi_trainer: SIGTERM -> one
#                    global commit of world_size 4, exit 75; a rank SIGKILLed
#                    mid-save -> that step never visible; resume byte-identical;
#                    4 ranks resumed on 2 (refused; --reshard: ckpt_restore_part);
#                    3 random-kill trials during the global commit
#   mpi_stress       the random-kill trials, 40 of them (`make stress`)
#   mpi_slurm        test_mpi.py Slurm: the trainer as 4 tasks of one srun
#                    step on a single-node SLURM started on loopback
# All nosan: they test the same C code as the unit tests, through mpirun.
if(NOT TARGET mpi_trainer OR NOT TARGET ckptrun)
  return()
endif()
find_program(CKPT_MPI_PY NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT CKPT_MPI_PY)
  return()
endif()
set(_mpi_py ${CMAKE_CURRENT_LIST_DIR}/integration/test_mpi.py)
set(_mpi_env "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")
add_test(NAME mpi_integration COMMAND ${CKPT_MPI_PY} ${_mpi_py} -v Stop Alone RankKilled WorldSize Trials)
set_tests_properties(mpi_integration PROPERTIES LABELS "integration;nosan;mpi" TIMEOUT 400
  SKIP_RETURN_CODE 77 ENVIRONMENT "${_mpi_env}")
add_test(NAME mpi_stress COMMAND ${CKPT_MPI_PY} ${_mpi_py} -v Trials)
set_tests_properties(mpi_stress PROPERTIES LABELS "stress;nosan;mpi" TIMEOUT 3600
  SKIP_RETURN_CODE 77 ENVIRONMENT "${_mpi_env};CKPT_MPI_TRIALS=40")
add_test(NAME mpi_slurm COMMAND ${CKPT_MPI_PY} ${_mpi_py} -v Slurm)
set_tests_properties(mpi_slurm PROPERTIES LABELS "integration;nosan;mpi" TIMEOUT 400
  SKIP_RETURN_CODE 77 ENVIRONMENT "${_mpi_env}")
