# tests/python.cmake -- the Python package `import ckpt` (libckpt/python,
# docs/python.md); include()d from tests/CMakeLists.txt. Each drives real
# torch with Debian's /usr/bin/python3 and the package of this build
# (<build>/python), and exits 77 (skip) without what it needs. Label nosan:
# an instrumented libckpt.so cannot load into an uninstrumented python.
#   python_api        tests/integration/test_py_api.py: round trips of every
#                     type and layout, save/change/load, dedup, fallback
#                     past damage and file checkpoints, the failure cases,
#                     a numpy-only trainer
#   python_kill       tests/integration/test_py_kill.py: SIGKILL at random,
#                     20 restarts, byte-identical parameters
#                     (python_kill_stress: 100 restarts, `make stress`)
#   python_ckptrun    tests/integration/test_py_ckptrun.py: SIGTERM, a notice,
#                     --interval, recover on a fresh machine, Ctrl-C on a
#                     pty, saved() answering a stop
#   python_torchrun   tests/integration/test_py_torchrun.py: 2 ranks of DDP
#                     with replicated model and optimizer
#   python_example    tests/integration/test_py_example.py: the example
#                     examples/python/train_ckpt.py as a new user runs it:
#                     SIGTERM under ckptrun, then the printed Resume
#                     command on a fresh HOME, identical; alone and on 2
#                     torchrun ranks
#   python_cuda       tests/integration/test_py_cuda.py: CUDA tensors (label
#                     cuda; skips without a GPU)
find_program(CKPT_PY3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT CKPT_PY3 OR NOT TARGET ckptrun)
  return()
endif()
set(_pyenv "${CKPT_TEST_ENV};PYTHONDONTWRITEBYTECODE=1")
function(ckpt_python_test name script timeout labels)
  add_test(NAME ${name} COMMAND ${CKPT_PY3} ${CMAKE_CURRENT_LIST_DIR}/integration/${script} -v)
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${timeout}
    SKIP_RETURN_CODE 77 ENVIRONMENT "${_pyenv};${ARGN}")
endfunction()
ckpt_python_test(python_api test_py_api.py 600 "integration;nosan")
ckpt_python_test(python_kill test_py_kill.py 900 "integration;nosan" CKPT_PY_KILLS=20)
# 100 lives of up to 0.6 s each: enough steps that training outlasts them
ckpt_python_test(python_kill_stress test_py_kill.py 3600 "stress;nosan" CKPT_PY_KILLS=100
  CKPT_PY_STEPS=30000)
ckpt_python_test(python_ckptrun test_py_ckptrun.py 600 "integration;nosan")
if(EXISTS /usr/bin/torchrun)
  ckpt_python_test(python_torchrun test_py_torchrun.py 900 "integration;nosan")
endif()
ckpt_python_test(python_example test_py_example.py 600 "integration;nosan")
ckpt_python_test(python_cuda test_py_cuda.py 300 "cuda;nosan")
