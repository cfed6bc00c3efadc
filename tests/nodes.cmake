# tests/nodes.cmake -- ckptrun on every node of a job; include()d from
# tests/CMakeLists.txt.
#   ckptrun_nodes  tests/integration/test_nodes.py: two torchrun 'nodes' on
#                  loopback, each under its own ckptrun (--nnodes 2
#                  --node-rank K --job-id ID), one store: a stop on one node
#                  stops both at one global step (exit 75), SIGKILL of node 0
#                  tears nothing, a new generation resumes byte-identical, a
#                  different node count is refused [nosan: torch; 77 without]
#   ckptrun_nodes_stop  the same file: a whole-node stop under torchrun with a
#                  fast HF-style writer on each node commits one global step
if(NOT TARGET ckptrun)
  return()
endif()
find_program(CKPT_NODES_PY NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT CKPT_NODES_PY)
  return()
endif()
add_test(NAME ckptrun_nodes
  COMMAND ${CKPT_NODES_PY} ${CMAKE_CURRENT_LIST_DIR}/integration/test_nodes.py -v
          Nodes.test_two_nodes Nodes.test_sigterm_shell_trainer Nodes.test_options)
set_tests_properties(ckptrun_nodes PROPERTIES LABELS "integration;nosan" TIMEOUT 420
  SKIP_RETURN_CODE 77
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")
# A whole-node stop under torchrun with a fast, unmodified HF-style writer
# saving on each node (issue 26, item 6) [nosan: torch; 77 without]
add_test(NAME ckptrun_nodes_stop
  COMMAND ${CKPT_NODES_PY} ${CMAKE_CURRENT_LIST_DIR}/integration/test_nodes.py -v
          Nodes.test_whole_node_stop_fast_hf_writer)
set_tests_properties(ckptrun_nodes_stop PROPERTIES LABELS "integration;nosan" TIMEOUT 300
  SKIP_RETURN_CODE 77
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}")
