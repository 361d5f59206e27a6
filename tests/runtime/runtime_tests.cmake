# The runtime's processes and training (label unit): the training job's preemption without
# loss (in process), the controller with its memory daemon and workers on the host backend,
# and `psw serve` end to end (label cli). Only where the executor is built.
if(PSW_HAVE_EXEC)
  add_executable(psw_runtime_tests
    ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_training.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_controller.cpp
    ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_serving_benchmark.cpp)
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
                                         ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_modes_cuda.cpp
                                         ${CMAKE_CURRENT_SOURCE_DIR}/support/crash_stack.cpp)
    set_target_properties(psw_runtime_gpu_tests PROPERTIES ENABLE_EXPORTS ON)  # names in crash_stack.cpp's stacks
    target_link_libraries(psw_runtime_gpu_tests PRIVATE psw_worker psw_server psw_client GTest::gtest GTest::gtest_main)
    target_compile_definitions(psw_runtime_gpu_tests PRIVATE
      PSW_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
      PSW_EXEC_PATH="$<TARGET_FILE:psw-exec>")
    add_dependencies(psw_runtime_gpu_tests psw-exec)
    gtest_discover_tests(psw_runtime_gpu_tests TEST_PREFIX runtime. PROPERTIES LABELS gpu TIMEOUT 600 DISCOVERY_TIMEOUT 120)
  endif()
endif()

# psw serve end to end (label cli): processes, sockets, both clients, SIGTERM. Each script gets
# psw, and where it asks the protocol's Python modules, their folder.
if(PSW_HAVE_EXEC)
  set(PSW_PROTO_PYTHON_ARG ${CMAKE_CURRENT_BINARY_DIR}/runtime_python)
  function(psw_serve_script_test name script timeout cost)
    add_test(NAME cli.serve.${name}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/runtime/${script} $<TARGET_FILE:psw> ${ARGN}
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(cli.serve.${name} PROPERTIES LABELS cli TIMEOUT ${timeout} COST ${cost})
  endfunction()
  psw_serve_script_test(end_to_end serve_end_to_end.sh 600 26 ${PSW_PROTO_PYTHON_ARG})
  psw_serve_script_test(daemon_death serve_daemon_death.sh 300 12)
  # SIGTERM with a full queue: the waiting requests answered UNAVAILABLE at once, exit 0.
  psw_serve_script_test(sigterm_queue serve_sigterm_queue.sh 300 10 ${PSW_PROTO_PYTHON_ARG})
  # The REST front end on a live server, from Python's urllib: JSON and binary tensors agree.
  psw_serve_script_test(rest serve_rest.sh 300 10)
  # The model repository's load and unload while training runs (Note [Repository load]).
  psw_serve_script_test(repository serve_repository.sh 300 30)
  # docs/examples/: curl, a requests client and a grpcio client against a live server.
  psw_serve_script_test(examples serve_examples.sh 300 10 ${PSW_PROTO_PYTHON_ARG})
  # cpu_wakeup_latency_us: held while serving, or refused at start saying why (Note [CPU wake-up latency]).
  psw_serve_script_test(cpu_latency serve_cpu_latency.sh 300 6)
  # Callers that give up (50 ms deadlines, 200 at once): withdrawn, never run; threads bounded.
  # Then 10,000 requests with 10 ms deadlines: threads and RSS bounded, latency afterwards as before.
  psw_serve_script_test(deadlines serve_deadlines.sh 300 10 ${PSW_PROTO_PYTHON_ARG})
  # Alone: it compares a request's latency before and after the flood, which a test beside it on
  # the same cores (a training job's) moves five- to sevenfold.
  set_tests_properties(cli.serve.deadlines PROPERTIES RUN_SERIAL TRUE)
  # psw load against a host-backend server: the simulator's arrivals, every request answered,
  # an unserved model refused.
  psw_serve_script_test(load load_end_to_end.sh 300 50)
  # The served training job's loss falls, and is the same bit for bit when requests preempt it.
  psw_serve_script_test(training_loss serve_training_loss.sh 600 16)
  # A decoder served (llama-tiny in bf16, its profile from psw profile) through psw client and psw load.
  psw_serve_script_test(decoder serve_decoder.sh 300 14 ${PSW_PROTO_PYTHON_ARG})
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
