# mpi_bench: built only when MPI was found (CKPT_HAVE_MPI); run by
# bench/run_mpi.sh (`make bench`).
if(CKPT_HAVE_MPI)
  add_executable(mpi_bench ${CMAKE_CURRENT_LIST_DIR}/mpi_bench.c)
  target_link_libraries(mpi_bench PRIVATE ckpt MPI::MPI_C)
endif()
