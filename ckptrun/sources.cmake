# ckptrun/sources.cmake -- included by the top-level CMakeLists.txt after the
# ckptrun/*.c glob and before add_executable(ckptrun): adjusts CKPTRUN_SRC.
#
# The notices module (ckptrun/notice*.c) needs libcurl and the IMDS client
# (uploaders/imds.c). ckptrun links libcurl through libckpt only when the
# object stores are built (CKPT_NEED_CURL); otherwise the module is left out
# and ckptrun runs without cloud notices (its hooks are weak symbols).
if(CKPT_NEED_CURL)
  set(_imds_in_lib OFF)
  foreach(_s ${CKPT_STORE_SRC})
    if(_s MATCHES "imds\\.c$")
      set(_imds_in_lib ON)
    endif()
  endforeach()
  if(NOT _imds_in_lib AND EXISTS ${CMAKE_SOURCE_DIR}/uploaders/imds.c)
    list(APPEND CKPTRUN_SRC ${CMAKE_SOURCE_DIR}/uploaders/imds.c)
  endif()
else()
  list(FILTER CKPTRUN_SRC EXCLUDE REGEX "/ckptrun/notice[^/]*\\.c$")
  message(STATUS "ckpt: libcurl not linked: ckptrun built without cloud notices")
endif()
