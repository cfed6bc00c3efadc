# ckptrun/notice.cmake -- the preemption-notice module (ckptrun/notice.h).
#
# ckptrun's own glob already compiles ckptrun/notice*.c into ckptrun; this
# file defines CKPT_NOTICE_SRC and a small static library, ckpt_notice
# (notice sources + the IMDS client), that the tests and tools link without
# needing the rest of libckpt. Requires libcurl and cJSON.
if(NOT TARGET PkgConfig::CURL)
  pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
endif()
if(NOT TARGET PkgConfig::CJSON)
  pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
endif()
find_package(Threads REQUIRED)

set(CKPT_NOTICE_SRC
  ${CMAKE_CURRENT_LIST_DIR}/notice.c
  ${CMAKE_CURRENT_LIST_DIR}/notice_parse.c)
set(CKPT_IMDS_SRC ${CMAKE_CURRENT_LIST_DIR}/../uploaders/imds.c)

add_library(ckpt_notice STATIC ${CKPT_NOTICE_SRC} ${CKPT_IMDS_SRC})
target_include_directories(ckpt_notice PUBLIC
  ${CMAKE_CURRENT_LIST_DIR}
  ${CMAKE_CURRENT_LIST_DIR}/../uploaders
  ${CMAKE_CURRENT_LIST_DIR}/../libckpt/include)
target_link_libraries(ckpt_notice PUBLIC PkgConfig::CURL PkgConfig::CJSON Threads::Threads)
