# tests/damage.cmake -- damage told as damage, and only damage, through the
# real binaries (ckptrun, the example C trainer) on file:// stores;
# include()d from tests/CMakeLists.txt. Label: integration. The library
# side is tests/unit/test_damage.c.
#   damage_verify_race  `ckptrun verify` again and again beside a trainer
#                       saving every 20 ms with --keep 3: never "damaged"
#   damage_head         HEAD garbage / bad checksum / empty: ls (--run and
#                       the runs table), restore,
#                       verify (exit 1, how to recover), the trainer's
#                       ckpt_restore and its next save, `ckptrun run`
#                       rewriting HEAD when it takes the lease
#   damage_ranks        a format-1 manifest claiming 2 ranks: damage, and
#                       the trainer's later saves commit
if(NOT TARGET ckptrun OR NOT TARGET c_trainer)
  return()
endif()
foreach(c verify_race head ranks)
  add_test(NAME damage_${c}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/integration/test_damage.sh
            $<TARGET_FILE:ckptrun> $<TARGET_FILE:c_trainer>
            ${CMAKE_BINARY_DIR}/tests/seal_record ${c})
  set_tests_properties(damage_${c} PROPERTIES LABELS integration TIMEOUT 180)
endforeach()
