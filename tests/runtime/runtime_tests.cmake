# The runtime's processes and training (label unit): the training job's preemption without
# loss (in process), the controller with its memory daemon and workers on the host backend,
# and `psw serve` end to end (label cli). Only where the executor is built.
if(PSW_HAVE_EXEC)
  add_executable(psw_runtime_tests
    ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_training.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_controller.cpp)
  target_link_libraries(psw_runtime_tests PRIVATE psw_runtime psw_control GTest::gtest GTest::gtest_main)
  target_compile_definitions(psw_runtime_tests PRIVATE
    PSW_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    PSW_EXEC_PATH="$<TARGET_FILE:psw-exec>")
  add_dependencies(psw_runtime_tests psw-exec)
  gtest_discover_tests(psw_runtime_tests TEST_PREFIX runtime. PROPERTIES LABELS unit TIMEOUT 900 DISCOVERY_TIMEOUT 60)
endif()
