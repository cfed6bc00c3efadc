# ckptrun tests, included from tests/CMakeLists.txt.
#   unit:        test_ckptrun_parse (cmocka) -- pure parsing in ckptrun/base/parse.c
#                test_ckptrun_sup (cmocka) -- notice queue, lease renewer,
#                the child's environment, fsutil
#                test_watch (cmocka) -- the directory watch's rules, the
#                control socket's `file` message
#                test_stop (cmocka) -- the stop state machine and the
#                supervisor's events under a fake clock (ckptrun/sup/sup_seam.h)
#                test_sup_nodes (cmocka) -- a node of a job of several
#                under the same fake clock (sup_nodes.c)
#   integration: ckptrun_integration -- tests/integration/test_ckptrun.py drives
#                the real ckptrun (and c_trainer when built) on file:// stores.
find_package(PkgConfig REQUIRED)
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)

add_executable(test_ckptrun_parse ${CMAKE_CURRENT_LIST_DIR}/unit/test_ckptrun_parse.c
  ${CMAKE_SOURCE_DIR}/ckptrun/base/parse.c ${CMAKE_SOURCE_DIR}/ckptrun/cli.c
  ${CMAKE_SOURCE_DIR}/ckptrun/cli_suggest.c)
target_include_directories(test_ckptrun_parse PRIVATE ${CMAKE_SOURCE_DIR}/ckptrun)
target_link_libraries(test_ckptrun_parse PRIVATE ckpt_internal PkgConfig::CMOCKA)
add_test(NAME test_ckptrun_parse COMMAND test_ckptrun_parse)
set_tests_properties(test_ckptrun_parse PROPERTIES LABELS unit TIMEOUT 60)

# The supervisor's parts that stand alone: the notice queue, the lease
# renewer, the child's environment, fsutil (cmocka; no wall-clock waits).
set(_cr ${CMAKE_SOURCE_DIR}/ckptrun)
add_executable(test_ckptrun_sup ${CMAKE_CURRENT_LIST_DIR}/unit/test_ckptrun_sup.c
  ${_cr}/sup/notice_queue.c ${_cr}/sup/renewer.c ${_cr}/record/lease.c ${_cr}/sup/child.c ${_cr}/sup/keeper.c
  ${_cr}/sup/proctree.c ${_cr}/base/fsutil.c ${_cr}/base/runlog.c ${_cr}/base/parse.c)
target_include_directories(test_ckptrun_sup PRIVATE ${_cr})
target_link_libraries(test_ckptrun_sup PRIVATE ckpt_internal PkgConfig::CMOCKA m)
add_dependencies(test_ckptrun_sup ckpt_python) # the child's PYTHONPATH names the package
add_test(NAME test_ckptrun_sup COMMAND test_ckptrun_sup)
set_tests_properties(test_ckptrun_sup PROPERTIES LABELS unit TIMEOUT 60)

# The supervisor's stop state machine and what its events mean, under a
# fake clock and a fake world (ckptrun/sup/sup_seam.h): notices, SIGTERM, the
# whole job's SIGTERM, short deadlines and their codec, failed commits,
# the child gone before the commit, Ctrl-C, requests that reach nobody
# (cmocka; nothing sleeps, starts a process or opens a socket or store).
# The real modules are linked for the symbols the event readers name; the
# code under test reaches them only through the seam.
# test_sup_nodes: a node of a job of several (sup_nodes.c) in the same
# fake world, its nodes' thread a view the test writes (tests/unit/fake_sup.h).
file(GLOB _watch_src ${_cr}/watch/*.c)
foreach(_t test_stop test_sup_nodes)
  add_executable(${_t} ${CMAKE_CURRENT_LIST_DIR}/unit/${_t}.c
    ${CMAKE_CURRENT_LIST_DIR}/unit/fake_sup.c
    ${_cr}/sup/stop.c ${_cr}/sup/sup_events.c ${_cr}/sup/sup_log.c ${_cr}/sup/sup_report.c ${_cr}/sup/request.c
    ${_cr}/sup/sup_nodes.c ${_cr}/nodes/nodesync.c ${_cr}/nodes/nodes.c ${_cr}/sup/claim.c ${_cr}/record/lease.c
    ${_cr}/sup/renewer.c ${_cr}/sup/notice_queue.c ${_cr}/sup/child.c ${_cr}/sup/keeper.c ${_cr}/sup/proctree.c
    ${_watch_src} ${_cr}/record/record.c ${_cr}/record/history.c ${_cr}/sup/resume_cmd.c
    ${_cr}/base/fsutil.c ${_cr}/opts.c ${_cr}/record/runs.c ${_cr}/base/runlog.c ${_cr}/base/parse.c)
  target_include_directories(${_t} PRIVATE ${_cr})
  target_link_libraries(${_t} PRIVATE ckpt_internal PkgConfig::CMOCKA m)
  add_test(NAME ${_t} COMMAND ${_t})
  set_tests_properties(${_t} PROPERTIES LABELS unit TIMEOUT 60)
endforeach()

# What `run` says so that nothing is lost in silence (cmocka): the
# watcher's watch_uncommitted() through the fault seam (unit/fault_store.h),
# the event history's failed commits, the RUN record's added fields, the
# resume command's words through /bin/sh.
file(GLOB _watch_src ${_cr}/watch/*.c)
add_executable(test_sup_report ${CMAKE_CURRENT_LIST_DIR}/unit/test_sup_report.c
  ${CMAKE_CURRENT_LIST_DIR}/unit/fault_store.c ${_watch_src}
  ${_cr}/record/record.c ${_cr}/base/runlog.c ${_cr}/base/parse.c ${_cr}/record/history.c ${_cr}/sup/resume_cmd.c)
target_include_directories(test_sup_report PRIVATE ${_cr} ${CMAKE_CURRENT_LIST_DIR}/unit)
target_link_libraries(test_sup_report PRIVATE ckpt_internal PkgConfig::CMOCKA m)
add_test(NAME test_sup_report COMMAND test_sup_report)
set_tests_properties(test_sup_report PROPERTIES LABELS unit TIMEOUT 120)

# The directory watch (when an entry is complete, at which step it is
# committed) on a real directory and file:// store, and the control
# socket's `file` message (cmocka; the rules tested never wait on a clock).
file(GLOB _watch_src ${_cr}/watch/*.c)
add_executable(test_watch ${CMAKE_CURRENT_LIST_DIR}/unit/test_watch.c
  ${_watch_src} ${_cr}/record/record.c ${_cr}/sup/ctlserver.c
  ${_cr}/sup/proctree.c ${_cr}/base/runlog.c ${_cr}/base/parse.c)
target_include_directories(test_watch PRIVATE ${_cr})
target_link_libraries(test_watch PRIVATE ckpt_internal PkgConfig::CMOCKA m)
add_test(NAME test_watch COMMAND test_watch)
set_tests_properties(test_watch PROPERTIES LABELS unit TIMEOUT 120)

add_test(NAME ckptrun_integration
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/integration/test_ckptrun.py)
set_tests_properties(ckptrun_integration PROPERTIES LABELS integration TIMEOUT 400
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}"
  DEPENDS test_ckptrun_parse)

# No silent loss (docs/ckptrun.md, "What a run tells you"):
# tests/integration/test_sup_report.py drives the real ckptrun against a
# store that stops accepting checkpoints (a 20 MiB tmpfs when mount is
# allowed, else skipped saying so; a fault seam: the run's chunks/ a plain
# file), unprotected runs, the last line and its resume command (run as
# printed), and the progress of run's commits on a pseudo-terminal
# (script(1); mock_s3.py behind faultproxy.py on loopback).
add_test(NAME ckptrun_report
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/integration/test_sup_report.py)
set_tests_properties(ckptrun_report PROPERTIES LABELS integration TIMEOUT 300
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")

# The watcher under writers that behave like real trainers:
# tests/integration/test_writers.py drives the real ckptrun with
# tests/integration/writers.py (HF Trainer-like checkpoint-N/ with rotation
# and rank shards after the marker, Lightning-like rename + last.ckpt link,
# several entries and a link in one checkpoint,
# a killed writer, a writer that never finishes, the step counter), stops it,
# and restores every committed checkpoint on a fresh HOME/CKPT_DIR. The
# torch.save overwrite case drives real torch: label nosan.
add_test(NAME ckptrun_writers
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/integration/test_writers.py
          HFTrainer ReproHF ReproFastHF Lightning ReproLightning ReproFlat ReproKilledWriter
          ReproCounter TrainerSteps)
set_tests_properties(ckptrun_writers PROPERTIES LABELS integration TIMEOUT 400
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")
add_test(NAME ckptrun_writers_torch
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/integration/test_writers.py TorchOverwrite)
set_tests_properties(ckptrun_writers_torch PROPERTIES LABELS "integration;nosan" TIMEOUT 300
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")
# The command line as a user meets it: tests/integration/test_cli.py.
#   cli_integration  subcommands, progress (under script(1)), --json, errors,
#                    colour, status, shared rules, plain-http warning, failing
#                    fast on a dead store, ls's tables, "did you mean" (file://,
#                    mock_s3.py and s3rver, loopback)
#   cli_build        the generated manual page and completions, cmake --install,
#                    pkg-config, make targets leaving the tree clean, package
#                    sets, a demo-set build where make install builds only what
#                    it installs (nosan: it builds and links outside the
#                    sanitizer build)
add_test(NAME cli_integration
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/integration/test_cli.py)
set_tests_properties(cli_integration PROPERTIES LABELS integration TIMEOUT 400
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_BUILD=${CMAKE_BINARY_DIR}")
add_test(NAME cli_build
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/integration/test_cli.py --build)
set_tests_properties(cli_build PROPERTIES LABELS "integration;nosan" TIMEOUT 600
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_BUILD=${CMAKE_BINARY_DIR}")
