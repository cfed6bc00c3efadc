# ckptrun/notice/notice.cmake -- the preemption-notice module
# (ckptrun/notice/notice.h) as a small static library, ckpt_notice, for the
# tests and tools that drive it without the rest of ckptrun: every
# ckptrun/notice/*.c (so a new provider's notice/<name>.c is found without a
# line here; the supervisor's side, notice_glue.c and notice_queue.c, is in
# sup/) except the transport this build does not use:
# notice/net.c when it polls (CKPT_NOTICE_POLLS, ckptrun/sources.cmake), else
# notice/none.c. It links libckpt's static library for the HTTP transport
# and the IMDS client.
set(_n ${CMAKE_CURRENT_LIST_DIR})
get_filename_component(_cr ${_n} DIRECTORY)
file(GLOB CKPT_NOTICE_SRC CONFIGURE_DEPENDS ${_n}/*.c)
if(CKPT_NOTICE_POLLS)
  list(FILTER CKPT_NOTICE_SRC EXCLUDE REGEX "/notice/none\\.c$")
else()
  list(FILTER CKPT_NOTICE_SRC EXCLUDE REGEX "/notice/net\\.c$")
endif()
add_library(ckpt_notice STATIC ${CKPT_NOTICE_SRC} ${_cr}/base/runlog.c)
# the include root of ckptrun: "notice/notice.h", "base/runlog.h"
target_include_directories(ckpt_notice PUBLIC ${_cr})
target_link_libraries(ckpt_notice PUBLIC ckpt_static ckpt_common PkgConfig::CJSON Threads::Threads m)
