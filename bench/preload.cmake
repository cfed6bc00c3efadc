# The preload shim's overhead bench: open/write/close outside CKPT_DIR, with
# and without libckpt_preload.so (bench/run_preload.sh, run by `make bench`).
if(TARGET ckpt_preload)
  add_executable(preload_bench preload_bench.c)
  add_dependencies(preload_bench ckpt_preload)
  target_compile_definitions(preload_bench PRIVATE
    CKPT_PRELOAD_SO="$<TARGET_FILE:ckpt_preload>")
endif()
