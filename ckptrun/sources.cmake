# ckptrun/sources.cmake -- included by the top-level CMakeLists.txt after the
# ckptrun/**/*.c glob and before add_executable(ckptrun): adjusts CKPTRUN_SRC.
#
# Cloud notices poll metadata services over the shared HTTP transport
# (uploaders/http.c), which is built with the object stores (libcurl). The
# poller, its provider table and parsers are built either way; its
# transport is notice/net.c with libcurl, else notice/none.c, which has
# nothing to poll with (nothing is polled; a provider asked for by name is
# told that notices need libcurl). CKPT_NOTICE_POLLS tells the tests
# (tests/notice.cmake, doctor.cmake) which.
if(CKPT_NEED_CURL AND (CKPT_WITH_S3 OR CKPT_WITH_AZURE))
  set(CKPT_NOTICE_POLLS ON)
  list(FILTER CKPTRUN_SRC EXCLUDE REGEX "/ckptrun/notice/none\\.c$")
else()
  set(CKPT_NOTICE_POLLS OFF)
  list(FILTER CKPTRUN_SRC EXCLUDE REGEX "/ckptrun/notice/net\\.c$")
  message(STATUS "ckpt: libcurl not linked: ckptrun built without cloud notices")
endif()
