# Tests of the Python example, the Python helper and the LD_PRELOAD shim.
# All drive real programs with /usr/bin/python3 (Debian's, where torch is);
# each skips (code 77) when what it needs is missing.
set(CKPT_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch for the examples' tests")

add_executable(preload_probe integration/preload_probe.c)
target_link_libraries(preload_probe PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)

# None of these run under CKPT_SANITIZE: the Python ones test no compiled
# code, and an instrumented shim cannot be preloaded into an uninstrumented
# python (the ASan runtime must come first in the process).
if(EXISTS ${CKPT_PYTHON} AND NOT CKPT_SANITIZE)
  if(TARGET ckpt_preload)
    add_test(NAME preload_shim
      COMMAND ${CKPT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_preload.py -v)
    set_tests_properties(preload_shim PROPERTIES LABELS integration TIMEOUT 300
      ENVIRONMENT "PRELOAD_SO=$<TARGET_FILE:ckpt_preload>;PRELOAD_PROBE=$<TARGET_FILE:preload_probe>;${CKPT_TEST_ENV}")
  endif()

  add_test(NAME python_helper
    COMMAND ${CKPT_PYTHON} -m unittest -v test_ckpt_helper
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/unit)
  set_tests_properties(python_helper PROPERTIES LABELS unit TIMEOUT 120
    ENVIRONMENT "PYTHONPATH=${CMAKE_SOURCE_DIR}/examples/python")

  foreach(trainer train train_helper)
    add_test(NAME torch_resume_${trainer}
      COMMAND ${CKPT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_torch_resume.py
              --trainer ${CMAKE_SOURCE_DIR}/examples/python/${trainer}.py)
    set_tests_properties(torch_resume_${trainer} PROPERTIES LABELS integration
      TIMEOUT 300 SKIP_RETURN_CODE 77)
  endforeach()
  if(TARGET ckpt_preload)
    # The unmodified trainer, killed and resumed under the shim.
    add_test(NAME torch_resume_preload
      COMMAND ${CKPT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_torch_resume.py
              --preload $<TARGET_FILE:ckpt_preload>)
    set_tests_properties(torch_resume_preload PROPERTIES LABELS integration
      TIMEOUT 300 SKIP_RETURN_CODE 77)
  endif()
endif()

# The example under the real ckptrun: preempted twice (SIGTERM), local disk
# wiped, resumed from the store, identical output.
if(EXISTS ${CKPT_PYTHON} AND TARGET ckptrun AND TARGET ckpt_preload AND NOT CKPT_SANITIZE)
  add_test(NAME ckptrun_python
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_ckptrun_python.sh)
  set_tests_properties(ckptrun_python PROPERTIES LABELS integration TIMEOUT 600
    SKIP_RETURN_CODE 77 ENVIRONMENT "${CKPT_TEST_ENV}")
endif()
