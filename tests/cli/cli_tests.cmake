# psw end to end. psw_cli_test(NAME CODE REGEX ARGS...) runs `psw ARGS...` from the source
# directory and expects exit code CODE and output matching REGEX.
set(PSW_EXPECT ${CMAKE_CURRENT_LIST_DIR}/expect.sh)
set(PSW_BAD ${CMAKE_CURRENT_SOURCE_DIR}/data/bad)
set(PSW_MODELS ${PROJECT_SOURCE_DIR}/configs/models)
set(PSW_HW ${PROJECT_SOURCE_DIR}/configs/hardware)

function(psw_cli_test name code regex)
  add_test(NAME cli.${name}
           COMMAND bash ${PSW_EXPECT} ${code} ${regex} -- $<TARGET_FILE:psw> ${ARGN}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.${name} PROPERTIES LABELS cli TIMEOUT 60)
endfunction()

# A CLI test as a shell script, run from the project root with a fresh temporary folder in
# $out (removed afterwards); it passes when the script exits 0.
function(psw_cli_script_test name timeout script)
  add_test(NAME cli.${name}
           COMMAND bash -c "out=$(mktemp -d) && cd ${PROJECT_SOURCE_DIR} && ${script}; rc=$?; rm -rf $out; exit $rc")
  set_tests_properties(cli.${name} PROPERTIES LABELS cli TIMEOUT ${timeout})
endfunction()


psw_cli_test(help 0 "plan" --help)
psw_cli_test(plan_help 0 "--strategy" plan --help)
# Every shipped model answers with every strategy (fixed uses a groups file per model).
foreach(model resnet152 inception_v3 bert_base)
  foreach(strategy single per-layer pipeswitch optimal)
    psw_cli_test(plan.${model}.${strategy} 0 "\"total_ns\"" plan --model ${PSW_MODELS}/${model}.yaml
                 --hardware ${PSW_HW}/h200-pcie5.yaml --strategy ${strategy} --format json)
  endforeach()
  psw_cli_test(plan.${model}.fixed 0 "\"total_ns\"" plan --model ${PSW_MODELS}/${model}.yaml
               --hardware ${PSW_HW}/h200-pcie5.yaml --strategy fixed
               --groups ${PROJECT_SOURCE_DIR}/configs/plans/${model}-artifact.yaml --format json)
  psw_cli_test(plan.${model}.training 0 "task +training" plan --model ${PSW_MODELS}/${model}.yaml
               --hardware ${PSW_HW}/v100-pcie3-x16.yaml --task training)
endforeach()
psw_cli_test(plan_table 0 "overhead" plan --model ${PSW_MODELS}/resnet152.yaml --hardware ${PSW_HW}/t4-pcie3-x8.yaml)
psw_cli_test(compare 0 "bert_base" compare --model ${PSW_MODELS}/bert_base.yaml --hardware ${PSW_HW}/h200-pcie5.yaml)
psw_cli_test(synth 0 "synthetic_transformer" synth --kind transformer --blocks 2)
# Note [Decision log]: psw replay-decisions on a log the policy decides otherwise (exit 3, the
# line named) and on bad logs (exit 2, the file and line named).
psw_cli_test(replay_decisions.differs 3 "differs.jsonl:4: after 2 identical events"
             replay-decisions ${CMAKE_CURRENT_SOURCE_DIR}/data/decisions/differs.jsonl)
psw_cli_test(replay_decisions.bad_kind 2 "bad-kind.jsonl:3: 'kind' is 'worker_teleported', expected one of"
             replay-decisions ${CMAKE_CURRENT_SOURCE_DIR}/data/decisions/bad-kind.jsonl)
psw_cli_test(replay_decisions.missing 2 "no-such.jsonl: cannot read the decision log"
             replay-decisions ${CMAKE_CURRENT_SOURCE_DIR}/data/decisions/no-such.jsonl)
psw_cli_script_test(replay_decisions.recorded_h200 120
                    "bash tests/cli/replay_recorded_decisions.sh $<TARGET_FILE:psw>")

# Note [Config files as JSON]: a file as psw reads it, for the scripts that draw; a file its
# reader refuses is refused.
psw_cli_test(config_json.hardware 0 "\"bandwidth_bytes_per_s\": 12000000000" config-json hardware ${PSW_HW}/v100-pcie3-x16.yaml)
psw_cli_test(config_json.experiment 0 "\"interval_ms\": 500" config-json experiment ${CMAKE_CURRENT_SOURCE_DIR}/data/sim/small.yaml)
# --set: overrides applied before the strict reader and the JSON, named in messages; only for
# the configs that take them.
psw_cli_test(config_json.serve_set 0 "\"batch\": 4" config-json serve ${PROJECT_SOURCE_DIR}/configs/serve/host-small.yaml
             --set training.batch=4)
psw_cli_test(config_json.serve_set_bad 2 "--set training.batch=-1: key 'training.batch'" config-json serve
             ${PROJECT_SOURCE_DIR}/configs/serve/host-small.yaml --set training.batch=-1)
psw_cli_script_test(config_json.serve_set_null 30
  "$<TARGET_FILE:psw> config-json serve configs/serve/host-small.yaml --set training=null > $out/j && grep -q '\"models\"' $out/j && ! grep -q '\"training\"' $out/j")
psw_cli_test(config_json.set_on_a_model 2 "--set: only experiment and serve configs take overrides, not a model file"
             config-json model ${PSW_MODELS}/resnet152.yaml --set batch=4)
psw_cli_test(config_json.refused 2 "cache: lru needs cache_bytes" config-json serve ${CMAKE_CURRENT_SOURCE_DIR}/data/bad-serve/bad_cache.yaml)
psw_cli_test(config_json.unknown_kind 2 "kind" config-json recipe ${PSW_HW}/v100-pcie3-x16.yaml)

# Bad arguments: exit code 2 and one message naming the problem.
psw_cli_test(no_subcommand 2 "subcommand")
psw_cli_test(unknown_option 2 "--bogus" plan --model ${PSW_MODELS}/resnet152.yaml --hardware ${PSW_HW}/h200-pcie5.yaml --bogus)
psw_cli_test(missing_model 2 "--model" plan --hardware ${PSW_HW}/h200-pcie5.yaml)
psw_cli_test(unknown_strategy 2 "unknown strategy 'fastest'" plan --model ${PSW_MODELS}/resnet152.yaml
             --hardware ${PSW_HW}/h200-pcie5.yaml --strategy fastest)
psw_cli_test(unknown_format 2 "unknown --format 'xml'" plan --model ${PSW_MODELS}/resnet152.yaml
             --hardware ${PSW_HW}/h200-pcie5.yaml --format xml)
psw_cli_test(missing_file 2 "nonexistent.yaml: no such file" plan --model nonexistent.yaml
             --hardware ${PSW_HW}/h200-pcie5.yaml)
psw_cli_test(fixed_without_groups 2 "needs --groups" plan --model ${PSW_MODELS}/resnet152.yaml
             --hardware ${PSW_HW}/h200-pcie5.yaml --strategy fixed)
psw_cli_test(unknown_task 2 "unknown task 'serving'" plan --model ${PSW_MODELS}/resnet152.yaml
             --hardware ${PSW_HW}/h200-pcie5.yaml --task serving)

# Special files: a device or a FIFO given as a config, trace or groups file is refused at once
# (exit 2, a message), never read (a FIFO without a writer blocks, /dev/zero never ends).
# `timeout 10`: a hang fails the test quickly instead of at ctest's limit.
set(PSW_EXPECT_FAST timeout 10 bash ${PSW_EXPECT})
function(psw_cli_fast_test name code regex)
  add_test(NAME cli.${name} COMMAND ${PSW_EXPECT_FAST} ${code} ${regex} -- $<TARGET_FILE:psw> ${ARGN}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.${name} PROPERTIES LABELS cli TIMEOUT 30)
endfunction()
psw_cli_fast_test(special.dev_zero_model 2 "/dev/zero: is not a regular file \\(a device, FIFO or socket\\)"
                  plan --model /dev/zero --hardware ${PSW_HW}/h200-pcie5.yaml)
psw_cli_fast_test(special.dev_zero_hardware 2 "/dev/zero: is not a regular file"
                  plan --model ${PSW_MODELS}/resnet152.yaml --hardware /dev/zero)
psw_cli_fast_test(special.dev_zero_groups 2 "/dev/zero: is not a regular file" plan --model ${PSW_MODELS}/resnet152.yaml
                  --hardware ${PSW_HW}/h200-pcie5.yaml --strategy fixed --groups /dev/zero)
psw_cli_fast_test(special.dev_zero_sim 2 "/dev/zero: is not a regular file" sim --config /dev/zero)
psw_cli_fast_test(special.dev_zero_sweep 2 "/dev/zero: is not a regular file" sweep --config /dev/zero)
psw_cli_fast_test(special.dev_zero_serve 2 "/dev/zero: is not a regular file" serve --backend host --config /dev/zero
                  --socket /tmp/psw-test-dev-zero/psw.sock)
# FIFOs: as a profile, a groups file, an experiment config and a trace (named by a config).
psw_cli_script_test(special.fifo 60
  "mkfifo $out/f && printf 'name: fifo\\nhardware: ${PSW_HW}/v100-pcie3-x16.yaml\\nmodels: [{name: resnet152, profile: ${PSW_MODELS}/resnet152.yaml}]\\nmechanism: pipeswitch\\nworkload: {kind: trace, format: csv, path: f}\\n' > $out/trace.yaml && check() { msg=$(timeout 10 $<TARGET_FILE:psw> \"$@\" 2>&1); rc=$?; echo \"psw $*: exit $rc: $msg\"; test $rc -eq 2 && echo \"$msg\" | grep -q 'not a regular file'; } && check plan --model $out/f --hardware ${PSW_HW}/h200-pcie5.yaml && check plan --model ${PSW_MODELS}/inception_v3.yaml --hardware ${PSW_HW}/h200-pcie5.yaml --strategy fixed --groups $out/f && check sim --config $out/f && check sweep --config $out/f && check sim --config $out/trace.yaml")
# A model profile larger than the 64 MiB psw reads (a sparse file: no disk used).
psw_cli_script_test(special.yaml_too_large 60
  "truncate -s 65M $out/big.yaml && msg=$(timeout 10 $<TARGET_FILE:psw> plan --model $out/big.yaml --hardware ${PSW_HW}/h200-pcie5.yaml 2>&1); test $? -eq 2 && echo \"$msg\" | grep -q 'larger than 64 MiB'")

# Numeric options out of range: a message naming the option (exit 2), never a wrapped value, an
# allocation that never ends or a NaN.
psw_cli_fast_test(numeric.synth_layers_huge 2 "--layers: Value 1000000000000 not in range" synth --kind cnn --layers 1000000000000)
psw_cli_fast_test(numeric.synth_blocks_huge 2 "--blocks: Value 100000000 not in range" synth --kind transformer --blocks 100000000)
psw_cli_fast_test(numeric.sim_seed_2_64 2 "--seed" sim --config ${CMAKE_CURRENT_SOURCE_DIR}/data/sim/small.yaml --seed 18446744073709551616)
psw_cli_fast_test(numeric.sim_seed_over_config_limit 2 "--seed: Value 9223372036854775807 not in range"
                  sim --config ${CMAKE_CURRENT_SOURCE_DIR}/data/sim/small.yaml --seed 9223372036854775807)
psw_cli_fast_test(numeric.sweep_jobs_huge 2 "--jobs: Value 1000000 not in range"
                  sweep --config ${CMAKE_CURRENT_SOURCE_DIR}/data/sim/sweep-small.yaml --jobs 1000000)
psw_cli_fast_test(numeric.client_timeout_nan 2 "--timeout: Value nan not in range" client --live --timeout nan)
psw_cli_fast_test(numeric.client_timeout_inf 2 "--timeout: Value inf not in range" client --live --timeout inf)
psw_cli_fast_test(numeric.client_seed_negative 2 "--seed: Value -5 is negative" client --live --seed -5)
psw_cli_fast_test(numeric.client_batch_negative 2 "--batch: Value -3 not in range" client --model m --random --batch -3)
psw_cli_fast_test(numeric.client_repeat_zero 2 "--repeat: Value 0 not in range" client --model m --random --repeat 0)
psw_cli_fast_test(numeric.client_steps_negative 2 "--steps: Value -1 not in range" client --train-start m --steps -1)
psw_cli_fast_test(bad_args.client_to_without_checkpoint 2 "--to is for --train-checkpoint" client --train-status m --to /tmp/x)
psw_cli_fast_test(bad_args.client_two_training_actions 2 "give one of --live" client --train-status m --train-checkpoint m)
psw_cli_fast_test(bad_args.serve_remote_without_allow 2 "--listen 10.255.255.1:8001: an address other hosts can reach is refused without --allow-remote"
                  serve --config configs/serve/host-small.yaml --listen 10.255.255.1:8001)
psw_cli_fast_test(bad_args.serve_remote_without_token 2 "--http-listen 10.255.255.1:8002: an address other hosts can reach with --allow-remote needs a bearer token"
                  serve --config configs/serve/host-small.yaml --http-listen 10.255.255.1:8002 --allow-remote)
psw_cli_fast_test(bad_args.serve_token_file_missing 2 "token file /nonexistent/token: no such file"
                  serve --config configs/serve/host-small.yaml --listen 127.0.0.1:0 --token-file /nonexistent/token)
psw_cli_fast_test(bad_args.client_token_file_missing 2 "token file /nonexistent/token: no such file"
                  client --live --token-file /nonexistent/token)
psw_cli_fast_test(bad_args.bench_serve_token_file_missing 2 "token file /nonexistent/token: no such file"
                  bench-serve --token-file /nonexistent/token)
psw_cli_fast_test(bad_args.profile_serving_token_file_missing 2 "token file /nonexistent/token: no such file"
                  profile-serving --name x --device host --token-file /nonexistent/token)
psw_cli_fast_test(bad_args.load_token_file_missing 2 "token file /nonexistent/token: no such file"
                  load --config configs/experiments/cycles-base.yaml --out /tmp/psw-never-written --token-file /nonexistent/token)
psw_cli_fast_test(numeric.bench_serve_rate_nan 2 "--rate: Value nan not in range" bench-serve --rate nan)
psw_cli_fast_test(numeric.bench_serve_window_inf 2 "--window: Value inf not in range" bench-serve --window inf)
psw_cli_fast_test(numeric.bench_serve_rounds_zero 2 "--rounds: Value 0 not in range" bench-serve --rounds 0)
# Invalid UTF-8 in a name: refused by the reader, also where JSON would be written.
psw_cli_fast_test(utf8.model_name_json 2 "model_invalid_utf8_name\\.yaml:2: key 'name': not valid UTF-8"
                  plan --model ${PSW_BAD}/model_invalid_utf8_name.yaml --hardware ${PSW_HW}/h200-pcie5.yaml --format json)

# Bad files: every file under tests/data/bad/ is one case; its first line says
#   # expect: <kind> <regex>
# where kind is model, hardware or groups.
file(GLOB PSW_BAD_FILES CONFIGURE_DEPENDS ${PSW_BAD}/*.yaml)
foreach(bad ${PSW_BAD_FILES})
  file(STRINGS ${bad} header LIMIT_COUNT 1)
  if(NOT header MATCHES "^# expect: (model|hardware|groups) (.*)$")
    message(FATAL_ERROR "${bad}: first line must be '# expect: model|hardware|groups REGEX'")
  endif()
  set(kind ${CMAKE_MATCH_1})
  set(regex ${CMAKE_MATCH_2})
  get_filename_component(case ${bad} NAME_WE)
  if(kind STREQUAL "model")
    psw_cli_test(bad.${case} 2 "${regex}" plan --model ${bad} --hardware ${PSW_HW}/h200-pcie5.yaml)
  elseif(kind STREQUAL "hardware")
    psw_cli_test(bad.${case} 2 "${regex}" plan --model ${PSW_MODELS}/inception_v3.yaml --hardware ${bad})
  else()
    psw_cli_test(bad.${case} 2 "${regex}" plan --model ${PSW_MODELS}/inception_v3.yaml
                 --hardware ${PSW_HW}/h200-pcie5.yaml --strategy fixed --groups ${bad})
  endif()
endforeach()

# Magnitudes that are valid one by one but overflow together (Note [Checked units]): a range
# error naming the inputs, exit 2, never wrapped totals or an internal error.
set(PSW_RANGE ${CMAKE_CURRENT_SOURCE_DIR}/data/range)
psw_cli_test(range.plan 2 "petabyte-model\\.yaml on .*slow-link\\.yaml: out of range: the transfer time"
             plan --model ${PSW_RANGE}/petabyte-model.yaml --hardware ${PSW_RANGE}/slow-link.yaml --strategy optimal)
psw_cli_test(range.compare 2 "petabyte-model\\.yaml on .*slow-link\\.yaml: out of range"
             compare --model ${PSW_MODELS}/bert_base.yaml ${PSW_RANGE}/petabyte-model.yaml --hardware ${PSW_RANGE}/slow-link.yaml)
# A compute time too long for int64 ns is reported as one, not as a transfer.
psw_cli_test(range.compute_time 2 "exaflop-model\\.yaml on .*one-flop-per-second\\.yaml: out of range: the compute time \\(FLOPs over the hardware's FLOP rate\\)"
             plan --model ${PSW_RANGE}/exaflop-model.yaml --hardware ${PSW_RANGE}/one-flop-per-second.yaml)
# Layers whose bytes add up past int64 (8193 layers of 1 PiB, the reader's limit each): an
# error naming the model, not a wrapped "negative size".
psw_cli_script_test(range.total_bytes 60
  "{ printf 'name: huge\\nbatch: 1\\ndtype: fp32\\nsource: {kind: analytic}\\nlayers:\\n'; for i in $(seq 8193); do printf '  - {name: l%d, kind: linear, param_bytes: 1125899906842624, forward_flops: 1}\\n' $i; done; } > $out/huge.yaml && $<TARGET_FILE:psw> plan --model $out/huge.yaml --hardware ${PSW_HW}/h200-pcie5.yaml > $out/log 2>&1; rc=$?; cat $out/log; test $rc -eq 2 && grep -q \"huge\\.yaml on .*h200-pcie5\\.yaml: out of range: the parameter bytes of model 'huge' add up past\" $out/log")
# A trace row past the span a workload may have is the trace's error, at its file and line.
psw_cli_test(range.sim_late_arrival 2 "late-arrival\\.csv:4: column 'arrival_ns': 9223372036854775000 ns is more than a year"
             sim --config ${PSW_RANGE}/late-arrival.yaml)

# The JSON carries the planner's fields (planner_ns among them), and --timeline writes a trace file.
# Placement (Note [Placement]): auto reads BERT's word embeddings in place on hardware with a
# mapped link, and is refused clearly where the hardware has none.
set(PSW_MAPPED_HW ${CMAKE_CURRENT_SOURCE_DIR}/data/sim/h200-mapped.yaml)
psw_cli_test(plan.placement_auto 0 "in place +embeddings.word_embeddings" plan --model ${PSW_MODELS}/bert_base.yaml
             --hardware ${PSW_MAPPED_HW} --placement auto)
# Profiles are named by file, not by their `name:` (two shipped hardware files share one).
psw_cli_test(plan.placement_no_link 2 "v100-pcie3-x16\\.yaml: --placement auto: the hardware profile has no link\\.mapped"
             plan --model ${PSW_MODELS}/bert_base.yaml --hardware ${PSW_HW}/v100-pcie3-x16.yaml --placement auto)
psw_cli_test(plan.training_without_backward_times 2
             "measured-inference-only\\.yaml: --task training: the profile of 'tiny_measured' has no measured backward times"
             plan --model ${CMAKE_CURRENT_SOURCE_DIR}/data/sim/measured-inference-only.yaml --hardware ${PSW_HW}/h200-pcie5.yaml
             --task training)
psw_cli_test(plan.placement_unknown 2 "unknown placement 'host'" plan --model ${PSW_MODELS}/bert_base.yaml
             --hardware ${PSW_MAPPED_HW} --placement host)
psw_cli_test(plan.placement_fixed 2 "not --strategy fixed" plan --model ${PSW_MODELS}/bert_base.yaml
             --hardware ${PSW_MAPPED_HW} --placement auto --strategy fixed --groups ${PROJECT_SOURCE_DIR}/configs/plans/bert_base-artifact.yaml)
psw_cli_test(plan_json_fields 0 "\"planner_ns\"" plan --model ${PSW_MODELS}/inception_v3.yaml
             --hardware ${PSW_HW}/h200-pcie5.yaml --format json)
add_test(NAME cli.plan_timeline_file
         COMMAND bash -c "out=$(mktemp) && $<TARGET_FILE:psw> plan --model ${PSW_MODELS}/bert_base.yaml --hardware ${PSW_HW}/h200-pcie5.yaml --timeline $out >/dev/null && grep -q traceEvents $out && grep -q 'copy group 0' $out; rc=$?; rm -f $out; exit $rc")
set_tests_properties(cli.plan_timeline_file PROPERTIES LABELS cli TIMEOUT 60)

# Simulation and sweeps.
set(PSW_SIM_DATA ${CMAKE_CURRENT_SOURCE_DIR}/data/sim)
psw_cli_test(sim_help 0 "--trace-out" sim --help)
psw_cli_test(sim.switch 0 "latency \\(ms\\) +mean" sim --config ${PROJECT_SOURCE_DIR}/configs/experiments/switch-base.yaml)
# The trace replays for the hardware (the cross-validation): a window and a sample of each public trace.
psw_cli_test(sim.replay_azure2019 0 "requests +2687$" sim --config ${PROJECT_SOURCE_DIR}/configs/experiments/replay-azure2019.yaml)
psw_cli_test(sim.replay_azure_llm2023 0 "requests +2146$" sim --config ${PROJECT_SOURCE_DIR}/configs/experiments/replay-azure-llm2023.yaml)
psw_cli_test(sim.set 0 "mechanism +stop-and-start" sim --config ${PSW_SIM_DATA}/small.yaml --set mechanism=stop-and-start)
# pipeswitch-parallel (Note [Parallel paths]): the switch through helper GPUs, set from the command line.
psw_cli_test(sim.parallel 0 "mechanism +pipeswitch-parallel" sim --config ${PSW_SIM_DATA}/parallel.yaml --set parallel.gpus=4)
psw_cli_test(sim.bad_set 2 "--set 'mechanism': expected KEY=VALUE" sim --config ${PSW_SIM_DATA}/small.yaml --set mechanism)
psw_cli_test(sim.missing_config 2 "nope\\.yaml: no such file" sim --config nope.yaml)
psw_cli_test(sim.negative_seed 2 "--seed" sim --config ${PSW_SIM_DATA}/small.yaml --seed -3)
psw_cli_script_test(sim.outputs 120
  "$<TARGET_FILE:psw> sim --config ${PSW_SIM_DATA}/poisson.yaml --out $out/run --trace-out $out/trace.json >/dev/null && test -s $out/run/requests.csv && grep -q p999_ms $out/run/summary.json && grep -q 'mechanism: pipeswitch' $out/run/config.resolved.yaml && python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); assert len(d['traceEvents']) > 10\" $out/trace.json")
# Note [The simulator drives the server policy]: psw sim's decision log replays through the
# policy as psw serve's does.
psw_cli_script_test(sim.decisions_replay 120
  "$<TARGET_FILE:psw> sim --config ${PSW_SIM_DATA}/training-batch16.yaml --set mechanism=stop-and-start --decisions $out/d.jsonl >/dev/null && $<TARGET_FILE:psw> replay-decisions $out/d.jsonl | grep -q 'the policy decides every one' && head -1 $out/d.jsonl | grep -q '\"fresh_process_per_task\":true'")
# The cross-validation sweep (H200-measured profiles): 12 points, and BERT switches faster with
# its embeddings read in place.
psw_cli_script_test(sweep.h200_measured 120
  "$<TARGET_FILE:psw> sweep --config configs/experiments/h200-measured.yaml --jobs 2 --out $out >/dev/null 2>&1 && test $(wc -l < $out/sweep.csv) -eq 13 && python3 -c \"import csv,sys; r={(x['workload.models'], x['mechanism'], x['placement']): float(x['mean_ms']) for x in csv.DictReader(open(sys.argv[1]))}; assert r[('[bert_base]', 'pipeswitch', 'auto')] < r[('[bert_base]', 'pipeswitch', 'copy')], r\" $out/sweep.csv")
psw_cli_script_test(sweep.small 120
  "$<TARGET_FILE:psw> sweep --config ${PSW_SIM_DATA}/sweep-small.yaml --jobs 2 --out $out >/dev/null 2>&1 && test $(wc -l < $out/sweep.csv) -eq 9 && head -1 $out/sweep.csv | grep -q '^point,mechanism,workload.models,seed,' ")

# Write errors are never ignored (Note [Checked writes]): a full device is exit code 1 and a
# message naming the file.
psw_cli_test(write.synth_full 1 "/dev/full: write failed: No space left on device"
             synth --kind transformer --blocks 1 --out /dev/full)
psw_cli_test(write.plan_full 1 "/dev/full: write failed: No space left on device"
             plan --model ${PSW_MODELS}/resnet152.yaml --hardware ${PSW_HW}/t4-pcie3-x8.yaml --out /dev/full)
psw_cli_test(write.plan_timeline_full 1 "/dev/full: write failed"
             plan --model ${PSW_MODELS}/resnet152.yaml --hardware ${PSW_HW}/t4-pcie3-x8.yaml --timeline /dev/full)
psw_cli_test(write.sim_trace_full 1 "/dev/full: write failed: No space left on device"
             sim --config ${PSW_SIM_DATA}/small.yaml --trace-out /dev/full)
psw_cli_script_test(write.stdout_full 60
  "$<TARGET_FILE:psw> plan --model ${PSW_MODELS}/resnet152.yaml --hardware ${PSW_HW}/t4-pcie3-x8.yaml > /dev/full 2> $out/err; test $? -eq 1 && grep -q 'standard output: write failed' $out/err")

# No stale or partial outputs (Note [Atomic output folders]). A run that fails after its
# outputs started (the trace's last row is out of order) leaves the earlier run whole and no
# temporary folder; so does a sweep with a failing point, which leaves no folder at all.
psw_cli_script_test(sim.failed_run_keeps_earlier_out 60
  "psw=$<TARGET_FILE:psw>; $psw sim --config ${PSW_SIM_DATA}/trace-late-bad.yaml --set workload.path=trace-ok.csv --out $out/run --trace-out $out/trace.json >/dev/null && cp -r $out/run $out/before && cp $out/trace.json $out/trace.before && $psw sim --config ${PSW_SIM_DATA}/trace-late-bad.yaml --out $out/run --trace-out $out/trace.json > $out/log 2>&1; test $? -eq 2 && grep -q 'late-bad-row.csv:7' $out/log && diff -r $out/before $out/run && cmp $out/trace.before $out/trace.json && test -z \"$(ls -d $out/run.* $out/trace.json.* 2>/dev/null)\"")
psw_cli_script_test(sim.out_replaces_earlier_run_whole 60
  "psw=$<TARGET_FILE:psw>; $psw sim --config ${PSW_SIM_DATA}/small.yaml --out $out/run >/dev/null && $psw sim --config ${PSW_SIM_DATA}/small.yaml --set 'outputs={requests_csv: false}' --out $out/run >/dev/null && test -f $out/run/summary.json && test ! -e $out/run/requests.csv && test -z \"$(ls -d $out/run.* 2>/dev/null)\"")
psw_cli_script_test(sim.out_refuses_foreign_folder 60
  "mkdir -p $out/home && echo precious > $out/home/notes.txt && $<TARGET_FILE:psw> sim --config ${PSW_SIM_DATA}/small.yaml --out $out/home > $out/log 2>&1; test $? -eq 2 && grep -q 'not an earlier output' $out/log && grep -q precious $out/home/notes.txt")
psw_cli_script_test(sweep.failing_point_leaves_nothing 60
  "$<TARGET_FILE:psw> sweep --config ${PSW_SIM_DATA}/sweep-late-failure.yaml --jobs 2 --out $out/sweep > $out/log 2>&1; test $? -eq 2 && grep -q 'point 1 workload.path=late-bad-row.csv' $out/log && test -z \"$(ls -A $out | grep -v '^log$')\"")
# Note [Interrupted runs]: SIGTERM or SIGHUP to a running psw sim or psw sweep leaves no
# DIR.tmp-<pid>; one left by SIGKILL is removed by the next run into DIR.
psw_cli_script_test(sim.interrupted_run_leaves_no_staging 120
  "bash tests/cli/interrupted_run.sh $<TARGET_FILE:psw>")
# Note [Resolved configs]: a run's config.resolved.yaml reruns it to the same summary.json.
psw_cli_script_test(sim.resolved_config_reruns 300
  "bash tests/cli/resolved_rerun.sh $<TARGET_FILE:psw>")

# --set errors name the option, not a line of the config (Note [Overridden keys in messages]).
psw_cli_test(sim.set_bad_value 2 "psw: error: --set workload\\.rate_per_s=-1: key 'workload\\.rate_per_s': must be between"
             sim --config ${PSW_SIM_DATA}/poisson.yaml --set workload.rate_per_s=-1)
psw_cli_test(sim.set_unknown_key 2 "psw: error: --set workload\\.rate_per_second=5: unknown key 'workload\\.rate_per_second'"
             sim --config ${PSW_SIM_DATA}/poisson.yaml --set workload.rate_per_second=5)
psw_cli_test(sim.set_unknown_top_key 2 "psw: error: --set bogus=1: unknown key 'bogus'"
             sim --config ${PSW_SIM_DATA}/poisson.yaml --set bogus=1)
psw_cli_test(sim.set_missing_in_new_section 2 "psw: error: --set training=\\{\\}: key 'training\\.model' is missing"
             sim --config ${PSW_SIM_DATA}/project-trace.yaml --set "training={}")
psw_cli_test(sim.set_key_in_absent_section 2 "psw: error: --set training\\.model=resnet152: the config has no 'training' section to set 'model' in. set the whole section instead"
             sim --config ${PSW_SIM_DATA}/project-trace.yaml --set training.model=resnet152)
psw_cli_test(sim.set_key_in_absent_section_outputs 2 "psw: error: --set outputs\\.requests_csv=false: the config has no 'outputs' section"
             sim --config ${PSW_SIM_DATA}/small.yaml --set outputs.requests_csv=false)
psw_cli_test(sim.set_key_in_a_scalar 2 "psw: error: --set mechanism\\.kind=x: 'mechanism' is not a mapping in the config"
             sim --config ${PSW_SIM_DATA}/small.yaml --set mechanism.kind=x)
# A key of the file keeps its line where other keys are overridden.
psw_cli_test(sim.set_other_key_keeps_line 2 "negative_interval\\.yaml:7: key 'workload\\.interval_ms': must be between 0"
             sim --config ${CMAKE_CURRENT_SOURCE_DIR}/data/bad-sim/negative_interval.yaml --set seed=4 --set workload.count=3)
psw_cli_script_test(sweep.failing_point_keeps_earlier_sweep 120
  "psw=$<TARGET_FILE:psw>; $psw sweep --config ${PSW_SIM_DATA}/sweep-small.yaml --jobs 2 --out $out/sweep >/dev/null 2>&1 && cp -r $out/sweep $out/before && $psw sweep --config ${PSW_SIM_DATA}/sweep-late-failure.yaml --jobs 2 --out $out/sweep >/dev/null 2>&1; test $? -eq 2 && diff -r $out/before $out/sweep && test -z \"$(ls -d $out/sweep.* 2>/dev/null)\"")

# Sweeps past one machine (Note [Sweep shards]): shards 1/2 and 2/2 merged give the
# single-process sweep.csv byte for byte; bad --shard values and bad shard sets are refused.
psw_cli_script_test(sweep.shards_merge_identical 120
  "psw=$<TARGET_FILE:psw>; c=${PSW_SIM_DATA}/sweep-small.yaml; $psw sweep --config $c --jobs 2 --out $out/whole >/dev/null 2>&1 && $psw sweep --config $c --jobs 2 --shard 1/2 --out $out/s1 >/dev/null 2>&1 && $psw sweep --config $c --jobs 2 --shard 2/2 --out $out/s2 >/dev/null 2>&1 && test -f $out/s1/sweep.shard-1-of-2.csv && test -d $out/s1/point-0002 && test ! -e $out/s1/point-0001 && $psw sweep-merge --out $out/merged $out/s2 $out/s1 >/dev/null && cmp $out/whole/sweep.csv $out/merged/sweep.csv && cmp $out/whole/sweep.json $out/merged/sweep.json")
foreach(shard 0/2 3/2 x/2 1/0 2 1/2/3)
  string(REPLACE "/" "_of_" case "${shard}")
  psw_cli_test(sweep.bad_shard.${case} 2 "--shard '${shard}'" sweep --config ${PSW_SIM_DATA}/sweep-small.yaml --shard ${shard} --out /nonexistent/never)
endforeach()
psw_cli_script_test(sweep_merge.refuses_bad_shard_sets 180
  "psw=$<TARGET_FILE:psw>; c=${PSW_SIM_DATA}/sweep-small.yaml; $psw sweep --config $c --jobs 2 --shard 1/2 --out $out/s1 >/dev/null 2>&1 && $psw sweep --config $c --jobs 2 --shard 2/2 --out $out/s2 >/dev/null 2>&1 && $psw sweep --config ${PSW_SIM_DATA}/sweep-late-failure.yaml --shard 1/2 --out $out/foreign >/dev/null 2>&1 && m() { $psw sweep-merge --out $out/merged \"$@\" > $out/m.log 2>&1; test $? -eq 2; } && m $out/s1 && grep -q 'shard 2/2 of sweep sweep-small is missing' $out/m.log && m $out/s1 $out/s1 $out/s2 && grep -q 'shard 1/2 given twice' $out/m.log && m $out/foreign $out/s2 && grep -q 'a shard of another sweep' $out/m.log && m $out/s1 $out/nowhere && grep -q 'no sweep.json' $out/m.log && $psw sweep-merge --out $out/s1 $out/s1 $out/s2 > $out/m.log 2>&1; test $? -eq 2 && grep -q 'one of the shard folders' $out/m.log && test ! -e $out/merged && sed -i '$d' $out/s2/sweep.shard-2-of-2.csv && m $out/s1 $out/s2 && grep -q 'point 7 of sweep sweep-small is missing' $out/m.log")

# scripts/slurm-sweep.sh's task and merge steps, run here as Slurm would run the array.
psw_cli_script_test(sweep.slurm_script_steps 120
  "export PSW=$<TARGET_FILE:psw> SLURM_ARRAY_TASK_COUNT=2 SLURM_CPUS_PER_TASK=2; c=${PSW_SIM_DATA}/sweep-small.yaml; $PSW sweep --config $c --jobs 2 --out $out/whole >/dev/null 2>&1 && SLURM_ARRAY_TASK_ID=1 bash scripts/slurm-sweep.sh --task $c $out/s >/dev/null 2>&1 && SLURM_ARRAY_TASK_ID=2 bash scripts/slurm-sweep.sh --task $c $out/s >/dev/null 2>&1 && bash scripts/slurm-sweep.sh --merge $out/s 2 >/dev/null && cmp $out/whole/sweep.csv $out/s/merged/sweep.csv")

# The server's mechanisms beside the simulator's (psw compare-serve, xval/compare.hpp): the
# join of tests/data/compare-serve/ with a row on each side only; the CSV written to --out; the
# h200-serve sweep (every mechanism the server runs, three models) joined with it; bad input.
set(PSW_COMPARE_DATA ${CMAKE_CURRENT_SOURCE_DIR}/data/compare-serve)
psw_cli_test(compare_serve.markdown 0
  "\\| pipeswitch \\| bert_base \\| ok \\| 9\\.848 \\| 10\\.944 \\| 10 \\| 8\\.224 \\| 8\\.224 \\| 8\\.224 \\| 10 \\| -16\\.5% \\|"
  compare-serve --measured ${PSW_COMPARE_DATA}/measured --predicted ${PSW_COMPARE_DATA}/predicted)
psw_cli_script_test(compare_serve.csv_out 60
  "$<TARGET_FILE:psw> compare-serve --measured ${PSW_COMPARE_DATA}/measured --predicted ${PSW_COMPARE_DATA}/predicted/sweep.csv --out $out/t.csv > $out/log && grep -q '6 rows, 3 compared (2 within 5%, 2 within 15%), 1 without a prediction, 2 without a measurement' $out/log && test $(wc -l < $out/t.csv) -eq 7 && grep -qx 'ready,bert_base,no-measurement,,,,5.822015,5.822015,5.822015,10,' $out/t.csv && grep -qx 'mps,resnet152,no-prediction,30.0,40.0,5,,,,,' $out/t.csv && grep -q '^pipeswitch,resnet152,ok,4.5,28.706037,10,4.488782,4.488782,4.488782,10,-0.00249' $out/t.csv && test -z \"$(ls $out | grep tmp)\"")
psw_cli_script_test(compare_serve.h200_serve_sweep 120
  "psw=$<TARGET_FILE:psw>; $psw sweep --config configs/experiments/h200-serve.yaml --jobs 2 --out $out/sim >/dev/null 2>&1 && test $(wc -l < $out/sim/sweep.csv) -eq 40 && $psw compare-serve --measured ${PSW_COMPARE_DATA}/measured --predicted $out/sim --out $out/t.csv > $out/log && grep -q '39 rows, 4 compared' $out/log && grep -q '0 without a prediction, 35 without a measurement' $out/log && test $(cut -d, -f1 $out/t.csv | sort -u | wc -l) -eq 14 && grep -q '^mps,resnet152,ok,' $out/t.csv")
psw_cli_test(compare_serve.bad_json 2 "bad/mechanism-pipeswitch\\.json:4:3: not JSON"
  compare-serve --measured ${PSW_COMPARE_DATA}/bad --predicted ${PSW_COMPARE_DATA}/predicted)
psw_cli_test(compare_serve.not_a_sweep 2 "trace-ok\\.csv:1: no column 'mechanism' \\(not a psw sweep CSV"
  compare-serve --measured ${PSW_COMPARE_DATA}/measured --predicted ${PSW_SIM_DATA}/trace-ok.csv)
psw_cli_test(compare_serve.no_reports 2 "predicted: no mechanism-<name>\\.json"
  compare-serve --measured ${PSW_COMPARE_DATA}/predicted --predicted ${PSW_COMPARE_DATA}/predicted)
psw_cli_test(compare_serve.bad_format 2 "unknown --format 'xml'"
  compare-serve --measured ${PSW_COMPARE_DATA}/measured --predicted ${PSW_COMPARE_DATA}/predicted --format xml)
psw_cli_test(compare_serve.missing_option 2 "--predicted is required"
  compare-serve --measured ${PSW_COMPARE_DATA}/measured)

# The sweep over MPI ranks (Note [Sweep over MPI]): sweep.csv identical to a single process,
# with one worker (-n 2) and with two (-n 3). Root in CI containers needs OpenMPI's consent.
if(PSW_WITH_MPI)
  psw_cli_script_test(sweep.mpi_identical 180
    "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1; psw=$<TARGET_FILE:psw>; c=${PSW_SIM_DATA}/sweep-small.yaml; $psw sweep --config $c --jobs 2 --out $out/whole >/dev/null 2>&1 && ${MPIEXEC_EXECUTABLE} -n 2 $psw sweep --config $c --out $out/mpi2 > $out/log2 2>&1 && cmp $out/whole/sweep.csv $out/mpi2/sweep.csv && test $(grep -c 'over 2 MPI ranks' $out/log2) -eq 1 && test -d $out/mpi2/point-0007 && ${MPIEXEC_EXECUTABLE} -n 3 $psw sweep --config $c --out $out/mpi3 > $out/log3 2>&1 && cmp $out/whole/sweep.csv $out/mpi3/sweep.csv && test $(grep -c 'over 3 MPI ranks' $out/log3) -eq 1 && cmp $out/whole/sweep.json $out/mpi3/sweep.json || { cat $out/log2 $out/log3 2>/dev/null; exit 1; }")
  psw_cli_script_test(sweep.mpi_failing_point_leaves_nothing 120
    "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1; ${MPIEXEC_EXECUTABLE} -n 2 $<TARGET_FILE:psw> sweep --config ${PSW_SIM_DATA}/sweep-late-failure.yaml --out $out/sweep > $out/log 2>&1; test $? -ne 0 && grep -q 'point 1 workload.path=late-bad-row.csv' $out/log && test -z \"$(ls -A $out | grep -v '^log$')\"")
endif()

# Bad experiment configs: every file under tests/data/bad-sim/ is one case; its first line
# says `# expect: <regex>` for the message of `psw sim` (exit code 2).
file(GLOB PSW_BAD_SIM_FILES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/data/bad-sim/*.yaml)
foreach(bad ${PSW_BAD_SIM_FILES})
  file(STRINGS ${bad} header LIMIT_COUNT 1)
  if(NOT header MATCHES "^# expect: (.*)$")
    message(FATAL_ERROR "${bad}: first line must be '# expect: REGEX'")
  endif()
  get_filename_component(case ${bad} NAME_WE)
  psw_cli_test(bad_sim.${case} 2 "${CMAKE_MATCH_1}" sim --config ${bad})
endforeach()

# Note [Kernel graph analysis] from the command line: a graph file's profile planned by psw plan,
# the plan's rewrite (one copy per group; the unreadable kernel waits for the last), the errors.
psw_cli_script_test(graph.profile_plan_rewrite 60
  "/usr/bin/python3 tests/cli/make_kernel_graph.py $out/g.json && $<TARGET_FILE:psw> graph --graph $out/g.json --name resnet_shaped --batch 8 --profile-out $out/p.yaml > $out/summary && grep -q '^layers *25$' $out/summary && grep -q '1 node(s) wait for every group' $out/summary && grep -q '36 kernel softmax' $out/summary && grep -q 'training_only: true' $out/p.yaml && $<TARGET_FILE:psw> plan --model $out/p.yaml --hardware ${PSW_HW}/h200-pcie5.yaml --out $out/plan.yaml > /dev/null && $<TARGET_FILE:psw> graph --graph $out/g.json --name resnet_shaped --plan $out/plan.yaml --format json > $out/r.json && /usr/bin/python3 -c \"import json,sys,yaml; r=json.load(open(sys.argv[1])); p=yaml.safe_load(open(sys.argv[2])); c=r['plan']['copies']; assert len(c)==len(p['groups'])>=2 and sum(x['bytes'] for x in c)==r['used_bytes']+r['unused_bytes'] and all(x['ranges']==1 for x in c) and c[-1]['nodes_using']>=1, r\" $out/r.json $out/plan.yaml && { ! $<TARGET_FILE:psw> graph --graph $out/g.json --plan $out/plan.yaml 2> $out/e1; } && grep -q \"the plan is for model 'resnet_shaped', not 'g'\" $out/e1 && /usr/bin/python3 tests/cli/make_kernel_graph.py $out/n.json --no-times && { ! $<TARGET_FILE:psw> graph --graph $out/n.json --profile-out $out/q.yaml 2> $out/e2; } && grep -q 'node 0 (implicit_convolve_sgemm) has no measured time' $out/e2 && echo '{\"format\": \"psw-kernel-graph-1\", \"parameters\": [], \"nodes\": [{\"kind\": \"launch\"}]}' > $out/b.json && { ! $<TARGET_FILE:psw> graph --graph $out/b.json 2> $out/e3; } && grep -q \"nodes\\[0\\]: unknown node kind 'launch'\" $out/e3")
# The executor's command, where LibTorch is found (host backend in CI).
if(PSW_HAVE_EXEC)
  psw_cli_test(run.placement_no_link 2 "v100-pcie3-x16\\.yaml: --placement auto: the hardware profile has no link\\.mapped"
               run --model bert_base --backend host --placement auto --hardware ${PSW_HW}/v100-pcie3-x16.yaml --repeat 1 --warmup 0 --batch 1)
  # The JSON's profile is relative to the current folder (the project root), not absolute.
  psw_cli_test(run.json_profile_relative 0 "\"profile\": \"configs/models/h200/bert_base\\.yaml\""
               run --model bert_base --backend host --repeat 1 --warmup 0 --batch 1 --format json
               --profile ${PROJECT_SOURCE_DIR}/configs/models/h200/bert_base.yaml)
  psw_cli_test(run.host 0 "latency +median" run --model inception_v3 --backend host --repeat 2 --warmup 0 --batch 1)
  # BERT-Tiny where the subject is the command, not the model (its analytic profile: no H200 one).
  psw_cli_test(run.host_json 0 "\"ready_ms\"" run --model bert_tiny --profile ${PSW_MODELS}/bert_tiny.yaml --backend host
               --mode per-layer-pipeline --repeat 1 --warmup 0 --batch 1 --format json)
  # Note [CPU wake-up latency]: a limit out of range is refused before anything runs.
  psw_cli_test(run.cpu_wakeup_latency_negative 2 "--cpu-wakeup-latency-us: Value -1 not in range 0 to 1000000"
               run --model bert_tiny --backend host --cpu-wakeup-latency-us -1)
  # No optimisation in one process: the per-layer copies, the forward after the last.
  psw_cli_test(run.host_no_optimization 0 "latency +median" run --model bert_tiny --profile ${PSW_MODELS}/bert_tiny.yaml
               --backend host --mode no-optimization --repeat 1 --warmup 0 --batch 1)
  psw_cli_test(run.host_placement 0 "^ +\"embeddings\\.word_embeddings\"$" run --model bert_tiny --backend host
               --placement auto --hardware ${CMAKE_CURRENT_SOURCE_DIR}/data/sim/h200-mapped.yaml --profile ${PSW_MODELS}/bert_tiny.yaml
               --repeat 1 --warmup 0 --batch 1 --format json)
  psw_cli_test(run.placement_with_plan 2 "not with --plan" run --model bert_base --backend host --placement auto
               --hardware ${CMAKE_CURRENT_SOURCE_DIR}/data/sim/h200-mapped.yaml --profile ${PSW_MODELS}/bert_base.yaml
               --groups ${PROJECT_SOURCE_DIR}/configs/plans/bert_base-artifact.yaml)
  psw_cli_test(run.bad_mode 2 "unknown mechanism 'fast'" run --model resnet152 --backend host --mode fast)
  psw_cli_test(run.server_mechanism 2 "needs the server" run --model resnet152 --backend host --mode mps)
  # A plan file made by psw plan --out runs as it is; a plan of another model is refused by name,
  # and one of the same model with other layer sizes by its fingerprint (Note [Layer fingerprint]).
  psw_cli_script_test(run.plan_file 300
    "$<TARGET_FILE:psw> plan --model ${PSW_MODELS}/inception_v3.yaml --hardware ${PSW_HW}/h200-pcie5.yaml --out $out/p.yaml >/dev/null && grep -q 'fingerprint: 0x' $out/p.yaml && $<TARGET_FILE:psw> run --model inception_v3 --backend host --plan $out/p.yaml --repeat 1 --warmup 0 --batch 1 --format json | grep -q '\"strategy\": \"optimal\"' && { $<TARGET_FILE:psw> run --model bert_base --backend host --plan $out/p.yaml --repeat 1 --warmup 0 --batch 1 2>&1; test $? -eq 2; } | grep -q \"is for model 'inception_v3'\" && sed -i 's/^fingerprint: .*/fingerprint: 0x1/' $out/p.yaml && { $<TARGET_FILE:psw> run --model inception_v3 --backend host --plan $out/p.yaml --repeat 1 --warmup 0 --batch 1 2>&1; test $? -eq 2; } | grep -q 'fingerprint'")
  # --dtype (the zoo in bf16/fp16): bf16 runs on the host with the analytic bf16 profile by default;
  # a bad name, a profile of another dtype and a plan made for another dtype are refused, each
  # by name.
  psw_cli_test(run.host_bf16 0 "\"dtype\": \"bf16\"" run --model inception_v3 --backend host --dtype bf16
               --repeat 1 --warmup 0 --batch 1 --format json)
  # No shipped profile in that dtype (a decoder in bf16): where one comes from, and the measured one.
  psw_cli_test(run.no_default_profile 2
               "no profile of llama-1b in bf16 at configs/models/bf16/llama-1b\\.yaml \\(the default\\). give --profile FILE: configs/models/h200/bf16/llama-1b\\.yaml was measured on an H200, or `psw profile --model .* --dtype bf16 --out DIR` measures one into DIR/bf16/llama-1b\\.yaml"
               run --model llama-1b --dtype bf16 --backend host)
  psw_cli_test(run.bad_dtype 2 "--dtype: unknown dtype 'fp8'.*fp32, bf16, fp16" run --model resnet152 --backend host
               --dtype fp8)
  psw_cli_test(run.profile_of_another_dtype 2 "resnet152\\.yaml: the profile is for dtype 'fp32', not 'bf16'" run
               --model resnet152 --backend host --dtype bf16 --profile ${PSW_MODELS}/resnet152.yaml)
  psw_cli_script_test(run.plan_of_another_dtype 300
    "$<TARGET_FILE:psw> plan --model ${PSW_MODELS}/bf16/inception_v3.yaml --hardware ${PSW_HW}/h200-pcie5.yaml --out $out/p.yaml >/dev/null && { $<TARGET_FILE:psw> run --model inception_v3 --backend host --plan $out/p.yaml --repeat 1 --warmup 0 --batch 1 2>&1; test $? -eq 2; } | grep -q 'made for inception_v3 in bf16 or fp16, not in fp32'")
  psw_cli_test(profile.bad_dtype 2 "--dtype: unknown dtype 'half'" profile --model bert_base --backend host --dtype half)
  psw_cli_test(run.unknown_model 2 "unknown model 'gpt2'" run --model gpt2 --backend host --profile ${PSW_MODELS}/resnet152.yaml)
  psw_cli_test(run.graph_on_host 2 "cannot capture graphs" run --model inception_v3 --backend host --graph --repeat 1 --warmup 0 --batch 1)
  # --weights (Note [Weight names] in exec/src/weights.cpp): refused before the model is built
  # when there is no file; a file that is not safetensors is named; torchvision's state_dict
  # (tests/exec/torchvision_reference.py) loads, every tensor of it.
  psw_cli_test(run.weights_no_file 2 "--weights: no-such\\.safetensors: no such file" run --model inception_v3
               --backend host --weights no-such.safetensors)
  psw_cli_test(run.weights_not_safetensors 2 "h200-pcie5\\.yaml: the header length" run --model inception_v3
               --backend host --weights ${PSW_HW}/h200-pcie5.yaml --repeat 1 --warmup 0 --batch 1)
  psw_cli_script_test(run.weights_torchvision 600
    "/usr/bin/python3 tests/exec/torchvision_reference.py --model inception_v3 --out $out >/dev/null && $<TARGET_FILE:psw> run --model inception_v3 --backend host --weights $out/inception_v3.safetensors --repeat 1 --warmup 0 --batch 1 | grep -q \"^weights .*inception_v3.safetensors: 580 tensors\"")
  # A decoder (Note [Time to first token]): profiled from the live model at a prompt length,
  # then a cold prefill measured beside copy-then-prefill and the resident model, and decoded.
  psw_cli_script_test(run.decoder_first_token 300
    "$<TARGET_FILE:psw> profile --model configs/zoo/llama-tiny.yaml --backend host --batch 1 --prompt-tokens 16 --repeat 2 --out $out >/dev/null && grep -q 'kind: measured' $out/llama-tiny.yaml && $<TARGET_FILE:psw> run --model configs/zoo/llama-tiny.yaml --backend host --profile $out/llama-tiny.yaml --batch 1 --prompt-tokens 16 --decode 4 --repeat 2 --warmup 1 --format json > $out/run.json && grep -q '\"time_to_first_token_ms\"' $out/run.json && grep -q '\"decode_tokens\": 4' $out/run.json && grep -q '\"per_token_replayed\": false' $out/run.json && grep -q '\"prompt_tokens\": 16' $out/run.json && $<TARGET_FILE:psw> run --model llama-tiny --backend host --profile $out/llama-tiny.yaml --batch 1 --prompt-tokens 16 --decode 2 --repeat 1 --warmup 0 | grep -q '^  copy, prefill' && { ! $<TARGET_FILE:psw> run --model llama-tiny --backend host --profile $out/llama-tiny.yaml --batch 1 --prompt-tokens 16 --decode 4000 --repeat 1 --warmup 0 2> $out/too-long; } && grep -q 'a prompt of 16 tokens and --decode 4000 need 4018 positions' $out/too-long")
  # Note [Prefill curve]: psw profile --prefill-tokens writes the curve; psw run predicts another
  # prompt from it, and refuses another prompt from a profile without one.
  psw_cli_script_test(run.decoder_prefill_curve 300
    "$<TARGET_FILE:psw> profile --model llama-tiny --backend host --batch 1 --prompt-tokens 16 --prefill-tokens 4,64 --decode-tokens 4 --repeat 2 --out $out/curve >/dev/null && grep -q '^prompt_tokens: 16$' $out/curve/llama-tiny.yaml && grep -q '^decode_step_ns: [1-9]' $out/curve/llama-tiny.yaml && { ! $<TARGET_FILE:psw> profile --model bert_base --backend host --decode-tokens 4 --out $out/b 2> $out/e0; } && grep -q 'are for decoders' $out/e0 && test $(grep -c '{tokens: ' $out/curve/llama-tiny.yaml) -eq 3 && $<TARGET_FILE:psw> run --model llama-tiny --backend host --profile $out/curve/llama-tiny.yaml --batch 1 --prompt-tokens 64 --repeat 1 --warmup 0 | grep -q '^prediction ' && $<TARGET_FILE:psw> profile --model llama-tiny --backend host --batch 1 --prompt-tokens 16 --repeat 2 --out $out/flat >/dev/null && ! $<TARGET_FILE:psw> run --model llama-tiny --backend host --profile $out/flat/llama-tiny.yaml --batch 1 --prompt-tokens 64 --repeat 1 --warmup 0 2> $out/err; grep -q 'are for a prompt of 16 tokens, not 64' $out/err")
  # --format json: what psw profile measured (each phase without and with per-layer marks) and
  # psw run's traced switch beside its prediction, broken down (TimelineBreakdown), for scripts.
  psw_cli_script_test(profile.json_and_traced_switch 300
    "$<TARGET_FILE:psw> profile --model llama-tiny --backend host --batch 1 --prompt-tokens 16 --repeat 2 --out $out --format json > $out/profile.json && /usr/bin/python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); p=d['phases']['inference_forward']; assert d['model']=='llama-tiny' and p['ms']>0 and p['with_marks_ms']>0 and d['layers_forward_ms']>0 and d['profile'].endswith('llama-tiny.yaml'), d\" $out/profile.json && $<TARGET_FILE:psw> run --model llama-tiny --backend host --profile $out/llama-tiny.yaml --batch 1 --prompt-tokens 16 --repeat 1 --warmup 0 --timeline $out/trace.json --format json > $out/run.json && /usr/bin/python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); t=d['traced_switch']; m, p = t['measured'], t['predicted']; assert m['groups']==p['groups']==d['groups'] and 0 < m['compute_busy_ms'] <= m['total_ms'] and m['compute_waits_ms'] >= 0 and m['first_compute_ms'] <= m['total_ms'] and p['total_ms']==d['predicted_ms'], t\" $out/run.json")
  # Note [AOTInductor packages]: Debian's LibTorch 1.13 has no AOTInductor (a LibTorch 2.x says the file is missing).
  psw_cli_test(profile.aoti_package 2 "missing\\.pt2: (an AOTInductor package needs LibTorch 2\\.6|no such file)"
               profile --model missing.pt2 --input-shape 4,3,16,16 --backend host)
  # Note [TorchScript models]: a user's TorchScript file (made here with python3-torch) profiled and
  # switched on the host, its input from --input-shape (the batch first); the errors.
  # Note [Several inputs]: a module of two inputs, each with its shape and dtype, profiled and run.
  psw_cli_script_test(run.torchscript_two_inputs 300
    "/usr/bin/python3 tests/exec/make_torchscript.py $out && $<TARGET_FILE:psw> profile --model $out/two_inputs.pt --input-shape 2,6 --input-shape 2,4 --input-dtype fp32 --input-dtype int64 --backend host --repeat 2 --out $out/p >/dev/null && $<TARGET_FILE:psw> run --model $out/two_inputs.pt --input-shape 2,6 --input-shape 2,4 --input-dtype fp32 --input-dtype int64 --backend host --profile $out/p/two_inputs.yaml --repeat 2 --warmup 0 --format json > $out/run.json && /usr/bin/python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); assert d['batch']==2 and d['latency_ms']['median']>0, d\" $out/run.json && { ! $<TARGET_FILE:psw> run --model $out/two_inputs.pt --input-shape 2,6 --backend host --profile $out/p/two_inputs.yaml 2> $out/e1; } && grep -q 'takes 2 inputs (features, ids), 1 given' $out/e1 && { ! $<TARGET_FILE:psw> run --model $out/two_inputs.pt --input-shape 2,6 --input-shape 2,4 --input-shape 2,4 --input-dtype fp32 --input-dtype int64 --backend host --profile $out/p/two_inputs.yaml 2> $out/e2; } && grep -q '2 --input-dtype for 3 --input-shape' $out/e2 && { ! $<TARGET_FILE:psw> run --model $out/two_inputs.pt --input-shape 2,6 --input-shape 3,4 --backend host --profile $out/p/two_inputs.yaml 2> $out/e3; } && grep -q 'every input has the same batch' $out/e3")
  psw_cli_script_test(run.torchscript 300
    "/usr/bin/python3 tests/exec/make_torchscript.py $out && $<TARGET_FILE:psw> profile --model $out/cnn.pt --input-shape 4,3,16,16 --backend host --repeat 2 --out $out/p >/dev/null && grep -q '^name: cnn$' $out/p/cnn.yaml && $<TARGET_FILE:psw> run --model $out/cnn.pt --input-shape 4,3,16,16 --backend host --profile $out/p/cnn.yaml --repeat 2 --warmup 0 --format json > $out/run.json && /usr/bin/python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); assert d['batch']==4 and d['groups']>=1 and d['latency_ms']['median']>0, d\" $out/run.json && { ! $<TARGET_FILE:psw> run --model $out/cnn.pt --backend host --profile $out/p/cnn.yaml 2> $out/e1; } && grep -q 'needs its input' $out/e1 && { ! $<TARGET_FILE:psw> run --model $out/cnn.pt --input-shape 4,3,16,16 --batch 2 --backend host --profile $out/p/cnn.yaml 2> $out/e2; } && grep -q 'disagree' $out/e2 && { ! $<TARGET_FILE:psw> run --model bert_base --input-shape 1,128 --backend host 2> $out/e3; } && grep -q 'are for TorchScript models' $out/e3 && { ! $<TARGET_FILE:psw> run --model $out/cnn.pt --input-shape 4,3,16,16 --graph --backend host 2> $out/e4; } && grep -q 'host backend cannot capture graphs' $out/e4 && { ! $<TARGET_FILE:psw> run --model $out/cnn.pt --input-shape 4,3,16,16 --graph --timeline $out/t.json 2> $out/e5; } && grep -q 'plans from its captured graph' $out/e5 && { ! $<TARGET_FILE:psw> profile --model $out/cnn.pt --input-shape 4,3,16,16 --graph --backend host 2> $out/e7; } && grep -q 'host backend cannot capture graphs' $out/e7 && { ! $<TARGET_FILE:psw> profile --model resnet152 --graph --backend host 2> $out/e8; } && grep -q 'from its captured graph; resnet152 is not one' $out/e8 && $<TARGET_FILE:psw> run --model $out/cnn.pt --input-shape 4,3,16,16 --graph --allow-uncaptured --backend host --repeat 3 --warmup 1 --format json > $out/u.json && /usr/bin/python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); assert d['captured'] is False and 'cannot capture graphs' in d['uncaptured_reason'] and d['outputs_equal']==d['outputs_checked']==3 and d['latency_ms']['median']>0, d\" $out/u.json && { ! $<TARGET_FILE:psw> run --model resnet152 --allow-uncaptured --backend host 2> $out/e9; } && grep -q 'allow-uncaptured are for a user' $out/e9 && { ! $<TARGET_FILE:psw> run --model resnet152 --graph-out $out/g.json --backend host 2> $out/e6; } && grep -q 'are for a user' $out/e6")
  psw_cli_test(profile.prefill_tokens_not_decoder 2 "--prompt-tokens, --prefill-tokens and --decode-tokens are for decoders" profile
               --model bert_base --backend host --batch 1 --prefill-tokens 64 --out /tmp/psw-test-prefill-not-decoder)
  psw_cli_test(run.prompt_tokens_not_decoder 2 "are for decoders" run --model bert_base --backend host
               --profile ${PSW_MODELS}/bert_base.yaml --prompt-tokens 16 --repeat 1 --warmup 0 --batch 1)
  psw_cli_test(run.decoder_config_missing 2 "configs/zoo/llama-70b\.yaml: no such file" run
               --model configs/zoo/llama-70b.yaml --backend host)
  if(NOT PSW_WITH_CUDA)
    psw_cli_test(run.no_cuda 2 "built without CUDA" run --model resnet152 --backend cuda)
  endif()
endif()
if(PSW_HAVE_EXEC)
  psw_cli_script_test(profile.host 300
    "$<TARGET_FILE:psw> profile --model inception_v3 --backend host --batch 1 --repeat 1 --link --link-max 16MiB --hardware-name cpu-test --out $out >/dev/null && grep -q 'kind: measured' $out/inception_v3.yaml && $<TARGET_FILE:psw> plan --model $out/inception_v3.yaml --hardware $out/cpu-test.yaml --format json | grep -q total_ns")
  # --dtype: the measured profile records its dtype, lands in a folder of its dtype, and psw run
  # plans from it in that dtype.
  psw_cli_script_test(profile.host_bf16 300
    "$<TARGET_FILE:psw> profile --model inception_v3 --backend host --dtype bf16 --batch 1 --repeat 1 --out $out >/dev/null && grep -q '^dtype: bf16$' $out/bf16/inception_v3.yaml && $<TARGET_FILE:psw> run --model inception_v3 --backend host --dtype bf16 --profile $out/bf16/inception_v3.yaml --repeat 1 --warmup 0 --batch 1 --format json | grep -q '\"dtype\": \"bf16\"'")
  # --train: every layer gets a backward time, and a measured profile with them plans training.
  # BERT-Tiny's 21 layers: BERT-base's modules with two encoder layers of eight, not twelve (101).
  psw_cli_script_test(profile.host_train 300
    "$<TARGET_FILE:psw> profile --model bert_tiny --backend host --batch 1 --repeat 1 --train --out $out >/dev/null && test $(grep -c 'backward_ns' $out/bert_tiny.yaml) -eq 21 && test $(grep -c '^  - ' $out/bert_tiny.yaml) -eq 21 && $<TARGET_FILE:psw> plan --model $out/bert_tiny.yaml --hardware configs/hardware/h200-pcie5.yaml --task training --format json | grep -q total_ns")
  # --timeline: one traced switch measured beside the predicted timeline, one process each.
  psw_cli_script_test(run.host_timeline 300
    "$<TARGET_FILE:psw> run --model inception_v3 --backend host --repeat 1 --warmup 0 --batch 1 --timeline $out/t.json >/dev/null && python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); t=d['otherData']['timelines']; assert len(t) == 2 and 'measured' in t[0]['title'] and 'predicted' in t[1]['title'], t; assert len([e for e in d['traceEvents'] if e['ph'] == 'X' and e['pid'] == 1]) > 0\" $out/t.json")
endif()

# Golden outputs (scripts/update-golden.sh): small simulations of pipeswitch, stop-and-start,
# mps, a project trace and pipeswitch-parallel, compared byte for byte with tests/data/golden/.
psw_cli_script_test(golden 120 "bash scripts/update-golden.sh --check $<TARGET_FILE:psw>")
# A project trace row at a batch its model's profile lacks: exit 2, the file and line named.
psw_cli_test(sim.trace_batch_refused 2 "trace-batch64.csv:3: column 'batch'" sim
             --config tests/data/sim/project-trace.yaml --set workload.path=trace-batch64.csv)

# psw load without a server: exit 1 naming it (its tests against a live server, cycles' closed
# loop included, are cli.serve.load in tests/runtime/runtime_tests.cmake).
psw_cli_test(load.no_server 1 "the server at unix:/tmp/psw-test-load-no-server/psw.sock did not answer the metadata of 'resnet152'" load
  --config ${PSW_SIM_DATA}/cycles.yaml --socket /tmp/psw-test-load-no-server/psw.sock)
psw_cli_test(load.cycles_senders 2 "--senders: .*cycles.yaml has a cycles workload, a closed loop" load
  --config ${PSW_SIM_DATA}/cycles.yaml --senders 4 --socket /tmp/psw-test-load-no-server/psw.sock)
psw_cli_test(validate.cycles_connections 2 "--connections: .*cycles.yaml has a cycles workload" validate
  --config ${PSW_SIM_DATA}/cycles.yaml --connections 2 --socket /tmp/psw-test-load-no-server/psw.sock)
psw_cli_test(load.time_scale_zero 2 "--time-scale: Value 0 not in range" load
  --config ${PSW_SIM_DATA}/small.yaml --time-scale 0)
# psw calibrate (Note [Pooled runs]): a cost taken from one run refuses several; several runs of
# one case pool.
set(PSW_ONE_PROCESS_RUN ${PROJECT_SOURCE_DIR}/results/gpu/raw-serve-2026-12-03-shm-all-a/validation/figures-one-process)
psw_cli_test(calibrate.worker_start_from_two_runs 2 "startup.worker_start is taken from one run. --measured was given 2 times"
  calibrate --config configs/experiments/h200-figures.yaml --measured ${PSW_ONE_PROCESS_RUN}
  --measured ${PSW_ONE_PROCESS_RUN} --cost startup.worker_start)
# The run's case with its own request path, the shipped profiles (absolute paths: the config is
# written elsewhere); the same run twice pools to its own host times over twice its switches.
psw_cli_script_test(calibrate.eager_pooled 60
  "c=$out/one-process.yaml; sed -e 's/^mechanism: .*/mechanism: one-process/' -e 's#\\.\\./#${PROJECT_SOURCE_DIR}/configs/#' -e 's#^serving: .*#serving: ${PSW_ONE_PROCESS_RUN}/../../serving-h200-from-load.yaml#' configs/experiments/h200-figures.yaml > $c && $<TARGET_FILE:psw> calibrate --config $c --measured ${PSW_ONE_PROCESS_RUN} --measured ${PSW_ONE_PROCESS_RUN} --cost eager_switch.host > $out/log 2>&1; cat $out/log; grep -q 'resnet152: prepare 13.742 ms, forward 13.890 ms (10 switches)' $out/log")
# Note [Unified memory's two costs]: fitted on a run of unified memory only.
psw_cli_test(calibrate.unified_memory_other_mechanism 2 "unified_memory is fitted on a run of unified-memory, but .*h200-figures.yaml is of pipeswitch"
  calibrate --config configs/experiments/h200-figures.yaml
  --measured ${PROJECT_SOURCE_DIR}/results/gpu/raw-figures-2026-12-02-b/validation/figures-unified-memory --cost unified_memory)
# psw validate: no server is exit 1 naming it.
psw_cli_test(validate.no_server 1 "psw validate: cannot reach the server at unix:/tmp/psw-test-validate-no-server/psw.sock" validate
  --config ${PSW_SIM_DATA}/validate-periodic.yaml --socket /tmp/psw-test-validate-no-server/psw.sock)
# psw validate --measured (Note [Validating again]): a folder without psw validate's files, and
# the options of a live server beside it, are refused naming what is wrong.
psw_cli_test(validate.measured_not_a_validation 2 "validation.json: no such file" validate
  --config ${PSW_SIM_DATA}/validate-periodic.yaml --measured ${PSW_SIM_DATA} --out /tmp/psw-test-validate-measured)
psw_cli_test(validate.measured_with_senders 2 "--senders excludes --measured" validate
  --config ${PSW_SIM_DATA}/validate-periodic.yaml --measured ${PSW_SIM_DATA} --senders 2)
# Note [Training share]: the alone window is a live server's; a recorded one is both numbers.
psw_cli_test(validate.measured_with_training_alone 2 "--measured excludes --training-alone" validate
  --config ${PSW_SIM_DATA}/validate-periodic.yaml --measured ${PSW_SIM_DATA} --training-alone 3)
psw_cli_test(validate.measured_half_alone 2 "recorded-half-alone/validation.json: 'training' needs both alone_steps" validate
  --config ${PSW_SIM_DATA}/validate-periodic.yaml --measured ${PSW_SIM_DATA}/recorded-half-alone
  --out /tmp/psw-test-validate-half-alone)
psw_cli_test(validate.training_alone_negative 2 "--training-alone: Value -1 not in range" validate
  --config ${PSW_SIM_DATA}/validate-periodic.yaml --training-alone -1)
# psw profile-serving --from-load: a file that is not psw load's requests.csv.
psw_cli_test(profile_serving.from_load_not_a_load 2 "serving-small.yaml: no column 'model'. expected psw load's requests.csv" profile-serving
  --from-load ${PSW_SIM_DATA}/serving-small.yaml --name x --device y --inputs raw)
# Note [Inputs in shared memory]: a requests.csv with no summary.json beside it needs --inputs.
psw_cli_test(profile_serving.from_load_without_inputs 2 "load-requests.csv: no psw load summary.json beside it to say how the load sent its inputs" profile-serving
  --from-load ${PSW_SIM_DATA}/load-requests.csv --name x --device y)
# Note [Protocol under load]: the growth taken from a profile that lacks one of the load's models.
psw_cli_test(profile_serving.growth_from_without_model 2
  "load-requests.csv: model 'bert_base' has no request path in the profile 'growth-resnet'" profile-serving
  --from-load ${PSW_SIM_DATA}/load-requests.csv --name x --device y --inputs raw
  --protocol-growth-from ${PSW_SIM_DATA}/serving-growth-resnet.yaml)
# Note [MPS contention]: the training step of a run at another batch, from its job alone
# (146 steps in 10 s: 68,493,151 ns), beside the load's request path; a run without it refused.
psw_cli_test(profile_serving.training_from_validation 0
  "- .model: resnet152, batch: 32, step_ns: 68493151." profile-serving
  --from-load ${PSW_SIM_DATA}/load-requests.csv --name x --device y --inputs raw --training-from-validation
  ${PSW_SIM_DATA}/validation-batch32 --training-model resnet152 --training-batch 32)
# Generated files name no path of the machine they were made on: the note names the files
# given (here absolute) relative to the profile written.
psw_cli_script_test(profile_serving.note_paths_relative 60
  "d=tests/data/.profile-note-$$; mkdir -p $d && $<TARGET_FILE:psw> profile-serving --from-load $PWD/tests/data/sim/load-requests.csv --name x --device y --inputs raw --training-from-validation $PWD/tests/data/sim/validation-batch32 --training-model resnet152 --training-batch 32 --out $d/p.yaml >/dev/null 2>&1; rc=$?; cat $d/p.yaml; grep -q 'from-load ../sim/load-requests.csv: ' $d/p.yaml && grep -q 'alone in ../sim/validation-batch32' $d/p.yaml && ! grep -q \"$PWD\" $d/p.yaml; ok=$?; rm -rf $d; test $rc -eq 0 -a $ok -eq 0")
psw_cli_test(profile_serving.training_from_validation_untrained 2
  "validation-untrained/validation.json: no 'training' \\(a psw validate run of a server with a training job\\)" profile-serving
  --from-load ${PSW_SIM_DATA}/load-requests.csv --name x --device y --inputs raw --training-from-validation
  ${PSW_SIM_DATA}/validation-untrained --training-model resnet152 --training-batch 32)
psw_cli_test(profile_serving.training_from_validation_without_model 2 "--training-from-validation requires --training-model"
  profile-serving --from-load ${PSW_SIM_DATA}/load-requests.csv --name x --device y --inputs raw --training-from-validation
  ${PSW_SIM_DATA}/validation-batch32)

# scripts/share_timeline.py (the monitors beside a share run's windows, for the serve report):
# what it keeps of nvidia-smi's and vmstat's rows, on a synthetic run.
psw_cli_script_test(scripts.share_timeline 60 "/usr/bin/python3 tests/scripts/test_share_timeline.py ${PROJECT_SOURCE_DIR} $out")
# scripts/any_model_report.py (gpu-any-model.sh's report and any-model.json's summary fields):
psw_cli_script_test(scripts.any_model_report 60 "/usr/bin/python3 tests/scripts/test_any_model_report.py ${PROJECT_SOURCE_DIR} $out")
