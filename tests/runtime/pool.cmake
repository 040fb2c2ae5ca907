# Actor pools (src/pool.c): each test runs its own embedded cluster.
add_executable(pool_test pool_test.c)
target_link_libraries(pool_test PRIVATE raydist)
add_dependencies(pool_test raydist_cli)
foreach(t grow_shrink grow_short_calls slow_replica backpressure map_ordered map_unordered map_errors map_stop replace resize opts_copied destroy bad_options stream stream_dropped stream_replica_dies)
  add_test(NAME pool_${t} COMMAND pool_test ${t})
  set_tests_properties(pool_${t} PROPERTIES TIMEOUT 120
    ENVIRONMENT "RAYDIST_BIN=$<TARGET_FILE:raydist_cli>;RAYDIST_LOG_LEVEL=0")
endforeach()
