# tests/proc.cmake -- ckptrun and the job's processes; include()d from
# tests/CMakeLists.txt.
#   ckptrun_proc     tests/integration/test_proc.py: the process tree (request
#                    signal, SIGKILL of ckptrun, leftovers), whole-job SIGTERM,
#                    Ctrl-C on a pty, socket trust, stale lease, stop reasons
#   ckptrun_torchrun tests/integration/test_torchrun.py: a 2-rank torchrun DDP
#                    trainer (gloo, CPU) under ckptrun [nosan: torch]
#   ckptrun_torchrun_fast  the same file, FastWriter: an unmodified trainer
#                    saving as HF does every ~0.7 s gets commits while it
#                    runs, each whole [nosan: torch]
#   ckptrun_slurm    tests/integration/test_slurm.py: a real single-node SLURM
#                    started on loopback, requeue recipes [nosan]
#   test_signals     (unit) libckpt takes SIGTERM/SIGINT as stops under ckptrun
ckpt_unit(test_signals)

if(NOT TARGET ckptrun)
  return()
endif()
find_program(CKPT_PROC_PY NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT CKPT_PROC_PY)
  return()
endif()
add_test(NAME ckptrun_proc
  COMMAND ${CKPT_PROC_PY} ${CMAKE_CURRENT_LIST_DIR}/integration/test_proc.py -v)
set_tests_properties(ckptrun_proc PROPERTIES LABELS integration TIMEOUT 300
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")

# torch and SLURM take a while and test the same C code as above: label
# nosan (the sanitizer pass skips them); each exits 77 (skip) when what it
# needs is missing.
add_test(NAME ckptrun_torchrun
  COMMAND ${CKPT_PROC_PY} ${CMAKE_CURRENT_LIST_DIR}/integration/test_torchrun.py -v Torchrun)
set_tests_properties(ckptrun_torchrun PROPERTIES LABELS "integration;nosan" TIMEOUT 600
  SKIP_RETURN_CODE 77
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")
add_test(NAME ckptrun_torchrun_fast
  COMMAND ${CKPT_PROC_PY} ${CMAKE_CURRENT_LIST_DIR}/integration/test_torchrun.py -v FastWriter)
set_tests_properties(ckptrun_torchrun_fast PROPERTIES LABELS "integration;nosan" TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")
add_test(NAME ckptrun_slurm
  COMMAND ${CKPT_PROC_PY} ${CMAKE_CURRENT_LIST_DIR}/integration/test_slurm.py -v)
set_tests_properties(ckptrun_slurm PROPERTIES LABELS "integration;nosan" TIMEOUT 400
  SKIP_RETURN_CODE 77
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")
