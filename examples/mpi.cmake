# mpi_trainer: built only when MPI was found (CKPT_HAVE_MPI, top-level
# CMakeLists.txt). Included from there inside if(CKPT_EXAMPLES).
if(CKPT_HAVE_MPI)
  add_executable(mpi_trainer examples/mpi_trainer/mpi_trainer.c)
  target_link_libraries(mpi_trainer PRIVATE ckpt MPI::MPI_C m)
endif()
