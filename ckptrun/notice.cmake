# ckptrun/notice.cmake -- the preemption-notice module (ckptrun/notice.h) as
# a small static library, ckpt_notice, for the tests and tools that drive it
# without the rest of ckptrun: every ckptrun/notice*.c (so a new provider's
# notice_<name>.c is found without a line here) except the supervisor's side
# (notice_glue.c, notice_queue.c) and the transport this build does not use:
# notice_net.c when it polls (CKPT_NOTICE_POLLS, ckptrun/sources.cmake), else
# notice_none.c. It links libckpt's static library for the HTTP transport
# and the IMDS client.
set(_n ${CMAKE_CURRENT_LIST_DIR})
file(GLOB CKPT_NOTICE_SRC CONFIGURE_DEPENDS ${_n}/notice*.c)
list(FILTER CKPT_NOTICE_SRC EXCLUDE REGEX "/notice_(glue|queue)\\.c$")
if(CKPT_NOTICE_POLLS)
  list(FILTER CKPT_NOTICE_SRC EXCLUDE REGEX "/notice_none\\.c$")
else()
  list(FILTER CKPT_NOTICE_SRC EXCLUDE REGEX "/notice_net\\.c$")
endif()
add_library(ckpt_notice STATIC ${CKPT_NOTICE_SRC} ${_n}/runlog.c)
target_include_directories(ckpt_notice PUBLIC ${_n})
target_link_libraries(ckpt_notice PUBLIC ckpt_static ckpt_common PkgConfig::CJSON Threads::Threads m)
