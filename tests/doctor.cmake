# tests/doctor.cmake -- `ckptrun doctor` against loopback mocks;
# include()d from tests/CMakeLists.txt. Label: integration.
#   doctor_providers  each provider via metadata_mock.py + a fake DMI dir,
#                     forced / none / Kubernetes / SLURM windows
#   doctor_badcreds   mock_s3.py refusing the key: fail line names the source
#   doctor_slow       mock_s3.py behind faultproxy.py at 2 MB/s: does not fit
#   doctor_disk       1 MiB tmpfs (when mountable) and CKPT_DOCTOR_DISK_FREE
#   doctor_changed    the changing share measured from the run's checkpoints
#   doctor_prereqs    a store that fails (path a file, unreadable or read-only
#                     directory as uid 65534): no crash, fail line with what
#                     to do, dependent checks skipped naming it, exit 1;
#   doctor_prereqs_s3 / _azure  the same for no credentials, a wrong secret,
#                     a closed port, a missing bucket (mock_s3.py), a wrong
#                     key and a missing container (Azurite)
if(NOT TARGET ckptrun)
  return()
endif()
set(_doctor_cases disk changed prereqs)
if(CKPT_NOTICE_POLLS)
  list(APPEND _doctor_cases providers) # cloud notices need libcurl
endif()
if(CKPT_WITH_S3)
  list(APPEND _doctor_cases badcreds slow prereqs_s3)
endif()
if(CKPT_WITH_AZURE)
  list(APPEND _doctor_cases prereqs_azure)
endif()
foreach(c ${_doctor_cases})
  add_test(NAME doctor_${c}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/integration/test_doctor.sh
            $<TARGET_FILE:ckptrun> ${CMAKE_SOURCE_DIR} ${c})
  set_tests_properties(doctor_${c} PROPERTIES LABELS integration TIMEOUT 120
    SKIP_RETURN_CODE 77)
endforeach()
