# bench/runtime.cmake - the runtime microbenchmark (included by bench/CMakeLists.txt).
add_executable(microbench ${CMAKE_CURRENT_SOURCE_DIR}/microbench.c)
target_link_libraries(microbench PRIVATE raydist m)
add_dependencies(microbench raydist_cli)
