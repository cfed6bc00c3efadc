# ckptrun/notice.cmake -- the preemption-notice module (ckptrun/notice.h) as
# a small static library, ckpt_notice, for the tests and tools that drive it
# without the rest of ckptrun: the poller when this build polls
# (CKPT_NOTICE_POLLS, ckptrun/sources.cmake), else notice_none.c; the reply
# parsers either way. It links libckpt's static library for the HTTP
# transport and the IMDS client.
set(_n ${CMAKE_CURRENT_LIST_DIR})
if(CKPT_NOTICE_POLLS)
  set(CKPT_NOTICE_SRC ${_n}/notice.c ${_n}/notice_net.c ${_n}/notice_report.c
      ${_n}/notice_providers.c ${_n}/notice_probe.c)
else()
  set(CKPT_NOTICE_SRC ${_n}/notice_none.c)
endif()
add_library(ckpt_notice STATIC ${CKPT_NOTICE_SRC} ${_n}/notice_parse.c ${_n}/runlog.c)
target_include_directories(ckpt_notice PUBLIC ${_n})
target_link_libraries(ckpt_notice PUBLIC ckpt_static ckpt_common PkgConfig::CJSON Threads::Threads m)
