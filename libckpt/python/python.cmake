# The Python package `ckpt` (libckpt/python/ckpt/, docs/python.md): pure
# Python over libckpt.so through ctypes, no compiler step of its own.
#
# Build tree: copied to <build>/python/ckpt/ with a _build.py that points
# at <build>/lib, so PYTHONPATH=<build>/python finds a package that loads
# the libckpt.so just built (ckptrun run from the build tree adds that
# directory to its child's PYTHONPATH by itself: child.c).
#
# Installed: into CKPT_PYTHON_DIR under the prefix, with a _build.py that
# points at the prefix's libdir relative to the package, so the installed
# package loads the libckpt.so of its own prefix wherever the prefix is
# moved. The default is where Debian's /usr/bin/python3 looks for the
# default prefix: lib/python3.X/dist-packages under /usr/local (on its
# sys.path), lib/python3/dist-packages under /usr. For another prefix, put
# <prefix>/${CKPT_PYTHON_DIR} on PYTHONPATH.
file(GLOB CKPT_PY_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/libckpt/python/ckpt/*.py)

if(NOT DEFINED CACHE{CKPT_PYTHON_DIR})
  set(_pydir lib/python3/dist-packages)
  if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    find_program(CKPT_SYSTEM_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
    if(CKPT_SYSTEM_PYTHON3)
      execute_process(COMMAND ${CKPT_SYSTEM_PYTHON3} -c
                        "import sys; print('%d.%d' % sys.version_info[:2])"
                      OUTPUT_VARIABLE _pyver OUTPUT_STRIP_TRAILING_WHITESPACE
                      RESULT_VARIABLE _pyrc)
      if(_pyrc EQUAL 0 AND _pyver MATCHES "^3\\.[0-9]+$")
        set(_pydir lib/python${_pyver}/dist-packages)
      endif()
    endif()
  endif()
  set(CKPT_PYTHON_DIR ${_pydir} CACHE STRING
    "Where the Python package is installed, relative to the prefix")
endif()
message(STATUS "ckpt: Python package installed into <prefix>/${CKPT_PYTHON_DIR}")

set(_pybuild ${CMAKE_BINARY_DIR}/python/ckpt)
set(_pyout)
foreach(src ${CKPT_PY_SRC})
  get_filename_component(_name ${src} NAME)
  add_custom_command(OUTPUT ${_pybuild}/${_name}
    COMMAND ${CMAKE_COMMAND} -E copy ${src} ${_pybuild}/${_name}
    DEPENDS ${src} VERBATIM)
  list(APPEND _pyout ${_pybuild}/${_name})
endforeach()
# _build.py: where libckpt.so is, relative to the package's directory.
file(WRITE ${CMAKE_BINARY_DIR}/python-build.py.tmp
  "# Written by CMake (libckpt/python/python.cmake): the build tree's libckpt.\nLIBDIR = \"../../lib\"\n")
configure_file(${CMAKE_BINARY_DIR}/python-build.py.tmp ${_pybuild}/_build.py COPYONLY)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(_pylib "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _pylib /p/${CKPT_PYTHON_DIR}/ckpt /p/${CMAKE_INSTALL_LIBDIR})
endif()
file(WRITE ${CMAKE_BINARY_DIR}/python-install/_build.py
  "# Written by CMake (libckpt/python/python.cmake): the prefix's libckpt.\nLIBDIR = \"${_pylib}\"\n")
if(IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}")
  set(CKPT_PYTHON_FROM_BIN "${CMAKE_INSTALL_PREFIX}/${CKPT_PYTHON_DIR}")
else()
  file(RELATIVE_PATH CKPT_PYTHON_FROM_BIN /p/${CMAKE_INSTALL_BINDIR} /p/${CKPT_PYTHON_DIR})
endif()
add_custom_target(ckpt_python ALL DEPENDS ${_pyout})
add_dependencies(ckpt_python ckpt)

install(FILES ${CKPT_PY_SRC} ${CMAKE_BINARY_DIR}/python-install/_build.py
        DESTINATION ${CKPT_PYTHON_DIR}/ckpt)
