# libckpt_preload.so: the LD_PRELOAD shim (`ckptrun --preload`), see
# docs/preload.md. Its sources are libckpt/src/preload/ (outside the
# library's own glob of libckpt/src/*.c). It carries the whole library
# inside (linking the object library brings its objects and its usage
# requirements), so a program that was never linked with libckpt can still
# call the API in-process; ckpt_preload.h declares the shim's own two
# functions.
file(GLOB CKPT_PRELOAD_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/libckpt/src/preload/*.c)
add_library(ckpt_preload SHARED ${CKPT_PRELOAD_SRC})
target_link_libraries(ckpt_preload PRIVATE ckpt_objs ${CMAKE_DL_LIBS} Threads::Threads)
set_target_properties(ckpt_preload PROPERTIES OUTPUT_NAME ckpt_preload)
if(NOT CKPT_SANITIZE AND NOT CKPT_FUZZ)
  # Every symbol must resolve inside the shim or its dependencies: a missing
  # one would only show when a user's program loads it.
  target_link_options(ckpt_preload PRIVATE -Wl,--no-undefined)
endif()
install(TARGETS ckpt_preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/ckpt_preload.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
