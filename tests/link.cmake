# Checkpoints across an emulated slow link (tests/tools/link.sh: s3rver in a
# network namespace behind tc tbf and tests/tools/linkproxy). Needs root and
# network namespaces: skipped (exit 77, the reason printed) otherwise.
# Label `link`: `ctest -LE link` leaves them out (they make a namespace and
# change qdiscs; the ASan pass runs them like the rest).
if(NOT CKPT_WITH_S3 OR NOT TARGET ckptrun OR NOT TARGET c_trainer)
  return()
endif()
add_test(NAME link_stop_restore COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_link.sh)
set_tests_properties(link_stop_restore PROPERTIES LABELS "integration;link" TIMEOUT 300
  SKIP_RETURN_CODE 77 ENVIRONMENT "${CKPT_TEST_ENV}")
