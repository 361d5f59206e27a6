# The layers of the project (docs/architecture.md), and the checks that keep them: a library
# may use (link, or include a header of) a library of a lower layer or of its own group, never
# one above it, nor a sibling of the same layer (sim and exec; ipc and proto; server, worker and
# client). A few edges downwards are barred too (PSW_LAYER_BARRED): what keeps LibTorch, gRPC and
# the simulator out of the processes that must not load them.
#
#   layer  group    libraries                                sources
#   0      core     psw_core                                 common/
#   1      sim      psw_sim                                  sim/
#   1      exec     psw_exec                                 exec/ (but exec/runtime/)
#   2      ipc      psw_ipc                                  exec/runtime/ipc/
#   2      proto    psw_proto (generated gRPC code)          exec/runtime/proto/
#   3      server   psw_server                               exec/runtime/server/
#   3      worker   psw_worker                               exec/runtime/worker/
#   3      client   psw_client                               exec/runtime/client/
#   4      xval     psw_xval                                 xval/
#   5      cli      psw_cli_app, psw_cli_commands, psw, psw-exec   cli/
#
# Two checks read this one table:
#   psw_check_layer_links()  at the end of configuring (top-level CMakeLists.txt): every edge of
#                            every listed target's link libraries; a FATAL_ERROR names the edge.
#                            A psw_* library missing from the table is an error too, so that a new
#                            library gets a place before it gets users.
#   check_layer_includes.cmake  the ctest test layers.includes (label unit): every
#                            #include "psw/..." in the sources of each group, which a link check
#                            cannot see (a header-only use links nothing).
# This file is included both by the build and by that script (cmake -P), so it defines only
# variables and functions.

set(PSW_LAYER_RANKS core:0 sim:1 exec:1 ipc:2 proto:2 server:3 worker:3 client:3 xval:4 cli:5)
# from>to: group `from` must not use group `to` although it lies below:
#   server>sim, client>sim, worker>sim, ipc>sim
#                   the runtime never links the simulator: the server decides by ServerPolicy,
#                   psw load draws arrivals from the workload sources (both psw_core)
#   server>exec, client>exec, ipc>exec
#                   LibTorch only in the workers: the controller does not load it, and psw
#                   (client, load, validate) starts in milliseconds
#   worker>proto    the workers load no gRPC
set(PSW_LAYER_BARRED server>sim client>sim worker>sim ipc>sim server>exec client>exec ipc>exec worker>proto)
set(PSW_LAYER_TARGETS
  psw_core:core psw_sim:sim psw_exec:exec psw_ipc:ipc psw_proto:proto psw_server:server
  psw_worker:worker psw_client:client psw_xval:xval
  psw_cli_app:cli psw_cli_commands:cli psw:cli psw-exec:cli)
# Source folders and header prefixes, the most specific first (the first match decides).
set(PSW_LAYER_FOLDERS
  exec/runtime/ipc:ipc exec/runtime/proto:proto exec/runtime/server:server exec/runtime/worker:worker
  exec/runtime/client:client common:core sim:sim exec:exec xval:xval cli:cli)
set(PSW_LAYER_HEADERS
  psw/runtime/ipc/:ipc psw/runtime/server/:server psw/runtime/worker/:worker
  psw/runtime/client/:client psw/common/:core psw/sim/:sim psw/exec/:exec psw/xval/:xval)

# `out` := the value of `key` in a list of key:value pairs, or "" when absent.
function(psw_layer_lookup pairs key out)
  set(value "")
  foreach(pair IN LISTS ${pairs})
    string(FIND "${pair}" ":" colon REVERSE)
    string(SUBSTRING "${pair}" 0 ${colon} k)
    if(k STREQUAL key)
      math(EXPR from "${colon} + 1")
      string(SUBSTRING "${pair}" ${from} -1 value)
      break()
    endif()
  endforeach()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

# `out` := the group of the first prefix in `pairs` that `path` starts with, or "".
function(psw_layer_by_prefix pairs path out)
  set(value "")
  foreach(pair IN LISTS ${pairs})
    string(FIND "${pair}" ":" colon REVERSE)
    string(SUBSTRING "${pair}" 0 ${colon} prefix)
    string(FIND "${path}" "${prefix}" at)
    if(at EQUAL 0)
      math(EXPR from "${colon} + 1")
      string(SUBSTRING "${pair}" ${from} -1 value)
      break()
    endif()
  endforeach()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

# `out` := "" when group `from` may use group `to`, else why not.
function(psw_layer_violation from to out)
  set(reason "")
  if(NOT from STREQUAL to)
    psw_layer_lookup(PSW_LAYER_RANKS ${from} from_rank)
    psw_layer_lookup(PSW_LAYER_RANKS ${to} to_rank)
    if(to_rank EQUAL from_rank)
      set(reason "${to} is a sibling of ${from} (layer ${to_rank})")
    elseif(to_rank GREATER from_rank)
      set(reason "${to} (layer ${to_rank}) is above ${from} (layer ${from_rank})")
    elseif("${from}>${to}" IN_LIST PSW_LAYER_BARRED)
      set(reason "${from} must not use ${to}, though below it (PSW_LAYER_BARRED)")
    endif()
  endif()
  set(${out} "${reason}" PARENT_SCOPE)
endfunction()

# Every build-system target defined in `dir` and the folders below it.
function(psw_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    psw_targets_below(${sub} below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The link check: run once every target is defined.
function(psw_check_layer_links)
  set(errors "")
  psw_targets_below(${PROJECT_SOURCE_DIR} all_targets)
  foreach(target IN LISTS all_targets)
    get_target_property(type ${target} TYPE)
    psw_layer_lookup(PSW_LAYER_TARGETS ${target} group)
    if(type MATCHES "LIBRARY$" AND target MATCHES "^psw_" AND NOT target STREQUAL "psw_warnings"
       AND group STREQUAL "")
      list(APPEND errors "library ${target} has no layer: give it one in cmake/layers.cmake")
    endif()
  endforeach()
  foreach(entry IN LISTS PSW_LAYER_TARGETS)
    string(REPLACE ":" ";" entry "${entry}")
    list(GET entry 0 target)
    list(GET entry 1 group)
    if(NOT TARGET ${target})
      continue()  # not built in this configuration (psw_exec, psw_worker without LibTorch)
    endif()
    get_target_property(links ${target} LINK_LIBRARIES)
    get_target_property(interface_links ${target} INTERFACE_LINK_LIBRARIES)
    foreach(item IN LISTS links interface_links)
      # $<LINK_ONLY:x> is how a static library passes on a PRIVATE x.
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
      if(NOT TARGET "${item}")
        continue()  # a file, a flag, or a generator expression: no project library
      endif()
      get_target_property(aliased "${item}" ALIASED_TARGET)
      if(aliased)
        set(item ${aliased})
      endif()
      psw_layer_lookup(PSW_LAYER_TARGETS "${item}" to)
      if(to STREQUAL "")
        continue()  # a third-party library, or psw_warnings (flags only)
      endif()
      psw_layer_violation(${group} ${to} reason)
      if(reason)
        list(APPEND errors "${target} -> ${item}: ${reason}")
      endif()
    endforeach()
  endforeach()
  if(errors)
    list(REMOVE_DUPLICATES errors)
    list(JOIN errors "\n  " text)
    message(FATAL_ERROR "psw: the layers (cmake/layers.cmake) are broken:\n  ${text}")
  endif()
endfunction()
