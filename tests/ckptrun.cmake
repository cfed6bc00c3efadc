# ckptrun tests, included from tests/CMakeLists.txt.
#   unit:        test_ckptrun_parse (cmocka) -- pure parsing in ckptrun/parse.c
#   integration: ckptrun_integration -- tests/integration/test_ckptrun.py drives
#                the real ckptrun (and c_trainer when built) on file:// stores.
find_package(PkgConfig REQUIRED)
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)

add_executable(test_ckptrun_parse ${CMAKE_CURRENT_LIST_DIR}/unit/test_ckptrun_parse.c
  ${CMAKE_SOURCE_DIR}/ckptrun/parse.c ${CMAKE_SOURCE_DIR}/ckptrun/cli.c)
target_include_directories(test_ckptrun_parse PRIVATE ${CMAKE_SOURCE_DIR}/ckptrun)
target_link_libraries(test_ckptrun_parse PRIVATE ckpt_internal PkgConfig::CMOCKA)
add_test(NAME test_ckptrun_parse COMMAND test_ckptrun_parse)
set_tests_properties(test_ckptrun_parse PROPERTIES LABELS unit TIMEOUT 60)

add_test(NAME ckptrun_integration
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/integration/test_ckptrun.py)
set_tests_properties(ckptrun_integration PROPERTIES LABELS integration TIMEOUT 400
  ENVIRONMENT "CKPT_BIN=${CMAKE_BINARY_DIR}/bin;CKPT_SRC=${CMAKE_SOURCE_DIR}"
  DEPENDS test_ckptrun_parse)
