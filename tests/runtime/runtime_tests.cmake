# The runtime's processes and training (label unit): the training job's preemption without
# loss (in process), the controller with its memory daemon and workers on the host backend,
# and `psw serve` end to end (label cli). Only where the executor is built.
if(PSW_HAVE_EXEC)
  add_executable(psw_runtime_tests
    ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_training.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_controller.cpp)
  target_link_libraries(psw_runtime_tests PRIVATE psw_worker psw_server psw_client GTest::gtest GTest::gtest_main)
  target_compile_definitions(psw_runtime_tests PRIVATE
    PSW_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    PSW_EXEC_PATH="$<TARGET_FILE:psw-exec>")
  add_dependencies(psw_runtime_tests psw-exec)
# COST (seconds, about): ctest starts the costliest tests first, so that no long one is left
# running alone at the end of a clean build's first run (one with no timings recorded yet).
  gtest_discover_tests(psw_runtime_tests TEST_PREFIX runtime. PROPERTIES LABELS unit TIMEOUT 900 COST 20
                       DISCOVERY_TIMEOUT 60)
  # On the GPU (label gpu; scripts/gpu-test.sh and gpu-serve.sh run it): training preempted
  # bit for bit, and the server's mechanisms on the cuda backend (test_modes_cuda.cpp).
  if(PSW_WITH_CUDA)
    add_executable(psw_runtime_gpu_tests ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_training_cuda.cpp
                                         ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_serve_cuda.cpp
                                         ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_modes_cuda.cpp)
    target_link_libraries(psw_runtime_gpu_tests PRIVATE psw_worker psw_server psw_client GTest::gtest GTest::gtest_main)
    target_compile_definitions(psw_runtime_gpu_tests PRIVATE
      PSW_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
      PSW_EXEC_PATH="$<TARGET_FILE:psw-exec>")
    add_dependencies(psw_runtime_gpu_tests psw-exec)
    gtest_discover_tests(psw_runtime_gpu_tests TEST_PREFIX runtime. PROPERTIES LABELS gpu TIMEOUT 600 DISCOVERY_TIMEOUT 120)
  endif()
endif()

# psw serve end to end (label cli): processes, sockets, both clients, SIGTERM.
if(PSW_HAVE_EXEC)
  add_test(NAME cli.serve.end_to_end
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/runtime/serve_end_to_end.sh $<TARGET_FILE:psw>
                   ${CMAKE_CURRENT_BINARY_DIR}/runtime_python
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.serve.end_to_end PROPERTIES LABELS cli TIMEOUT 600 COST 26)
  add_test(NAME cli.serve.daemon_death
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/runtime/serve_daemon_death.sh $<TARGET_FILE:psw>
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.serve.daemon_death PROPERTIES LABELS cli TIMEOUT 300 COST 12)
  # SIGTERM with a full queue: the waiting requests answered UNAVAILABLE at once, exit 0.
  add_test(NAME cli.serve.sigterm_queue
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/runtime/serve_sigterm_queue.sh $<TARGET_FILE:psw>
                   ${CMAKE_CURRENT_BINARY_DIR}/runtime_python
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.serve.sigterm_queue PROPERTIES LABELS cli TIMEOUT 300 COST 10)
  # The REST front end on a live server, from Python's urllib: JSON and binary tensors agree.
  add_test(NAME cli.serve.rest
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/runtime/serve_rest.sh $<TARGET_FILE:psw>
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.serve.rest PROPERTIES LABELS cli TIMEOUT 300 COST 10)
  # docs/examples/: curl, a requests client and a grpcio client against a live server.
  add_test(NAME cli.serve.examples
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/runtime/serve_examples.sh $<TARGET_FILE:psw>
                   ${CMAKE_CURRENT_BINARY_DIR}/runtime_python
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.serve.examples PROPERTIES LABELS cli TIMEOUT 300 COST 10)
  # Callers that give up (50 ms deadlines, 200 at once): withdrawn, never run; threads bounded.
  add_test(NAME cli.serve.deadlines
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/runtime/serve_deadlines.sh $<TARGET_FILE:psw>
                   ${CMAKE_CURRENT_BINARY_DIR}/runtime_python
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.serve.deadlines PROPERTIES LABELS cli TIMEOUT 300 COST 10)
  # psw load against a host-backend server: the simulator's arrivals, every request answered,
  # an unserved model refused.
  add_test(NAME cli.serve.load
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/runtime/load_end_to_end.sh $<TARGET_FILE:psw>
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.serve.load PROPERTIES LABELS cli TIMEOUT 300 COST 50)
  # A decoder served (llama-tiny in bf16, its profile from psw profile) through psw client and psw load.
  add_test(NAME cli.serve.decoder
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/runtime/serve_decoder.sh $<TARGET_FILE:psw>
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.serve.decoder PROPERTIES LABELS cli TIMEOUT 300 COST 14)
  # The cross-validation on the host: profiles measured here predict a host server within a
  # tolerance, and a 3x profile does not. Alone (RUN_SERIAL): the CPU's times are its subject.
  add_test(NAME cli.serve.validate_host
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/runtime/validate_host.sh $<TARGET_FILE:psw>
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.serve.validate_host PROPERTIES LABELS cli TIMEOUT 600 RUN_SERIAL TRUE)
  psw_cli_test(serve.metrics_on_every_interface 2 "refusing to listen on every interface" serve --backend host
               --config ${PROJECT_SOURCE_DIR}/configs/serve/host-small.yaml --socket /tmp/psw-test-metrics-wildcard/psw.sock
               --metrics-listen 0.0.0.0:9464)
  psw_cli_test(serve.unknown_backend 2 "unknown --backend 'tpu'" serve --backend tpu
               --config ${PROJECT_SOURCE_DIR}/configs/serve/host-small.yaml)
  psw_cli_test(serve.decisions_unwritable 2 "--decisions /nonexistent-psw-dir/d.jsonl: cannot write it" serve
               --backend host --config ${PROJECT_SOURCE_DIR}/configs/serve/host-small.yaml
               --socket /tmp/psw-test-decisions-unwritable/psw.sock --decisions /nonexistent-psw-dir/d.jsonl)
endif()
# Bad serve configs: the first line of each says what the error must match.
file(GLOB PSW_BAD_SERVE ${CMAKE_CURRENT_SOURCE_DIR}/data/bad-serve/*.yaml)
foreach(bad ${PSW_BAD_SERVE})
  file(STRINGS ${bad} first LIMIT_COUNT 1)
  if(first MATCHES "^# expect: (.*)$")
    get_filename_component(case ${bad} NAME_WE)
    psw_cli_test(bad_serve.${case} 2 "${CMAKE_MATCH_1}" serve --backend host --config ${bad}
                 --socket /tmp/psw-test-bad-serve-${case}/psw.sock)
  endif()
endforeach()
