# tests/recover.cmake -- `ckptrun recover`, leases and fencing; include()d
# from tests/CMakeLists.txt.
#   unit:        test_lease (tests/CMakeLists.txt) -- ckptrun/record/lease.c alone
#   integration: tests/integration/test_recover.py drives the real ckptrun
#                and c_trainer: races of `recover`, SIGKILL and SIGSTOP of a
#                runner, and a preemption by a mock metadata notice resumed
#                by a cron-like loop. Loopback only.
#     recover_integration  on file:// and (S3 builds) tests/tools/mock_s3.py
#     recover_peers        the races on Azurite and s3rver (tests/npm)
#   Each exits 77 -- skipped -- when none of its subtests failed but some
#   could not run (no PID namespaces, no S3 in the build, no tests/npm).
if(NOT TARGET ckptrun OR NOT TARGET c_trainer)
  return()
endif()
find_program(CKPT_RECOVER_PY NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT CKPT_RECOVER_PY)
  return()
endif()
add_test(NAME recover_integration
  COMMAND ${CKPT_RECOVER_PY} ${CMAKE_CURRENT_LIST_DIR}/integration/test_recover.py)
add_test(NAME recover_peers
  COMMAND ${CKPT_RECOVER_PY} ${CMAKE_CURRENT_LIST_DIR}/integration/test_recover.py --peers)
set_tests_properties(recover_integration recover_peers PROPERTIES LABELS integration TIMEOUT 400
  SKIP_RETURN_CODE 77
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")
