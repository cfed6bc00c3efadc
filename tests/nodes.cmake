# tests/nodes.cmake -- ckptrun on every node of a job; include()d from
# tests/CMakeLists.txt.
#   ckptrun_nodes  tests/integration/test_nodes.py: two torchrun 'nodes' on
#                  loopback, each under its own ckptrun (--nnodes 2
#                  --node-rank K --job-id ID), one store: a stop on one node
#                  stops both at one global step (exit 75), SIGKILL of node 0
#                  tears nothing, a new generation resumes byte-identical, a
#                  different node count is refused [nosan: torch; 77 without]
if(NOT TARGET ckptrun)
  return()
endif()
find_program(CKPT_NODES_PY NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT CKPT_NODES_PY)
  return()
endif()
add_test(NAME ckptrun_nodes
  COMMAND ${CKPT_NODES_PY} ${CMAKE_CURRENT_LIST_DIR}/integration/test_nodes.py -v)
set_tests_properties(ckptrun_nodes PROPERTIES LABELS "integration;nosan" TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")
