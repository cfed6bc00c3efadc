# tests/notice.cmake -- tests of the notice module; include()d from
# tests/CMakeLists.txt. Labels: unit, integration, fuzz.
# Every test talks to 127.0.0.1 only (tests/tools/metadata_mock.py).
if(NOT TARGET ckpt_notice)
  include(${CMAKE_CURRENT_LIST_DIR}/../ckptrun/notice/notice.cmake)
endif()
set(_nt ${CMAKE_CURRENT_LIST_DIR})

# fuzz: the corpus replayed without an engine; the libFuzzer build with clang
# (fuzz_notice.c carries its own replay main under FUZZ_REPLAY_MAIN)
add_executable(fuzz_notice ${_nt}/fuzz/fuzz_notice.c)
target_compile_definitions(fuzz_notice PRIVATE FUZZ_REPLAY_MAIN)
target_link_libraries(fuzz_notice PRIVATE ckpt_notice)
add_test(NAME fuzz_notice_replay COMMAND fuzz_notice ${_nt}/fuzz/corpus/notice)
set_tests_properties(fuzz_notice_replay PROPERTIES LABELS fuzz TIMEOUT 60)
if(CMAKE_C_COMPILER_ID MATCHES "Clang" AND CKPT_FUZZ)
  add_executable(fuzz_notice_libfuzzer ${_nt}/fuzz/fuzz_notice.c)
  target_compile_options(fuzz_notice_libfuzzer PRIVATE -fsanitize=fuzzer)
  target_link_options(fuzz_notice_libfuzzer PRIVATE -fsanitize=fuzzer)
  target_link_libraries(fuzz_notice_libfuzzer PRIVATE ckpt_notice)
endif()

# The rest drives the poller: only in builds that poll (libcurl).
if(NOT CKPT_NOTICE_POLLS)
  return()
endif()

# unit (cmocka)
if(NOT TARGET PkgConfig::CMOCKA)
  pkg_check_modules(CMOCKA IMPORTED_TARGET cmocka)
endif()
if(TARGET PkgConfig::CMOCKA)
  add_executable(test_notice ${_nt}/unit/test_notice.c)
  target_link_libraries(test_notice PRIVATE ckpt_notice PkgConfig::CMOCKA)
  add_test(NAME test_notice COMMAND test_notice)
  set_tests_properties(test_notice PROPERTIES LABELS unit TIMEOUT 60)
else()
  message(STATUS "ckpt: cmocka not found: test_notice not built")
endif()

# integration: one test per provider, each with its own mock server. The
# providers are read from the table (NOTICE_PROVIDER_LIST in notice/types.h): a
# new provider gets its integration_notice_<name> here, and notice_itest
# fails until it has a test for it.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_nt}/../ckptrun/notice/types.h)
file(STRINGS ${_nt}/../ckptrun/notice/types.h _nl REGEX "^#define NOTICE_PROVIDER_LIST\\(X\\)")
string(REGEX MATCHALL "X\\(([a-z0-9_]+)\\)" _nl "${_nl}")
string(REGEX REPLACE "X\\(([a-z0-9_]+)\\)" "\\1" CKPT_NOTICE_PROVIDERS "${_nl}")
if(NOT CKPT_NOTICE_PROVIDERS)
  message(FATAL_ERROR "tests/notice.cmake: no provider found in NOTICE_PROVIDER_LIST")
endif()
find_program(CKPT_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
add_executable(notice_itest ${_nt}/integration/notice_itest.c)
target_link_libraries(notice_itest PRIVATE ckpt_notice)
if(CKPT_PYTHON3)
  foreach(p imds ${CKPT_NOTICE_PROVIDERS})
    add_test(NAME integration_notice_${p}
             COMMAND notice_itest ${_nt}/tools/metadata_mock.py ${p})
    set_tests_properties(integration_notice_${p} PROPERTIES LABELS integration TIMEOUT 180)
  endforeach()
endif()

# manual tool
add_executable(notice_probe ${_nt}/tools/notice_probe.c)
target_link_libraries(notice_probe PRIVATE ckpt_notice)

# end to end: ckptrun stops on a notice
if(TARGET ckptrun AND CKPT_PYTHON3)
  add_test(NAME integration_notice_ckptrun
           COMMAND bash ${_nt}/integration/test_notice_ckptrun.sh $<TARGET_FILE:ckptrun>
                   ${_nt}/tools/metadata_mock.py)
  set_tests_properties(integration_notice_ckptrun PROPERTIES LABELS integration TIMEOUT 120)
endif()
