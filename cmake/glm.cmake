# Project conventions: folder = module = CMake library = namespace.
#
#   glm_module(NAME DEPS dep1 dep2 ... [LIBS extra_libs...])
#
# turns src/NAME into the static library glm_NAME from every *.cc in the folder except
# *_test.cc, *_fuzz.cc and *_bench.cc; every *_test.cc becomes part of the test binary NAME_test (GoogleTest,
# registered with ctest); every *_fuzz.cc becomes a libFuzzer target when GLM_FUZZ is on;
# every *_bench.cc becomes a Google Benchmark executable of the same name.
# Files named *_avx2.cc, *_avxvnni.cc (AVX2 + AVX-VNNI) and *_avx512.cc are compiled for that
# instruction set only; the code
# chooses among them at run time.

set(GLM_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
if(GLM_WERROR)
  list(APPEND GLM_WARNINGS -Werror)
endif()
set(GLM_SAN_FLAGS "")
if(GLM_SANITIZE STREQUAL "address")
  set(GLM_SAN_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
elseif(GLM_SANITIZE STREQUAL "thread")
  set(GLM_SAN_FLAGS -fsanitize=thread)
endif()
if(GLM_FUZZ)
  # Instrument every library for coverage, so the fuzzers see the code they test; undefined
  # behaviour stops the run (clang's default prints it and goes on, which no fuzzer or test
  # would report). The unit tests of the untrusted-input modules build here too (test.sh).
  list(APPEND GLM_SAN_FLAGS -fsanitize=fuzzer-no-link,address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
endif()
add_compile_options(${GLM_WARNINGS} ${GLM_SAN_FLAGS})
add_link_options(${GLM_SAN_FLAGS})

set(GLM_AVX2_FLAGS -mavx2 -mfma -mf16c)
set(GLM_AVXVNNI_FLAGS ${GLM_AVX2_FLAGS} -mavxvnni)
set(GLM_AVX512_FLAGS -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16)

# How a test binary is built, from cold on CI's 2 cores: GoogleTest and nlohmann-json, most of
# a test file's parse time, once for the whole build (one precompiled header, made by the object
# library glm_test_pch and reused by every test binary: 25 copies of it were an eighth of a cold
# build) instead of once per file; and the test files unoptimized (GCC's optimizer is a third of
# such a file's build time, while the tests spend their time in the libraries, which keep their
# flags). A test binary's flags must stay those of glm_test_pch (GCC checks: -Winvalid-pch).
set(GLM_TEST_FLAGS -O0)
function(glm_test_build target)
  if(NOT TARGET glm_test_pch)
    add_library(glm_test_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/test_pch.cc)
    target_link_libraries(glm_test_pch PRIVATE GTest::gtest GTest::gmock nlohmann_json::nlohmann_json)
    target_compile_options(glm_test_pch PRIVATE ${GLM_TEST_FLAGS})
    target_precompile_headers(glm_test_pch PRIVATE
      <gmock/gmock.h> <gtest/gtest.h> <nlohmann/json.hpp> <string> <vector>)
  endif()
  target_precompile_headers(${target} REUSE_FROM glm_test_pch)
  target_compile_options(${target} PRIVATE ${GLM_TEST_FLAGS})
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
endfunction()

function(glm_module name)
  cmake_parse_arguments(M "" "" "DEPS;LIBS;TEST_LIBS" ${ARGN})
  file(GLOB all_cc CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  set(srcs "")
  set(tests "")
  set(fuzzers "")
  set(benches "")
  foreach(f ${all_cc})
    if(f MATCHES "_test\\.cc$")
      list(APPEND tests ${f})
    elseif(f MATCHES "_fuzz\\.cc$")
      list(APPEND fuzzers ${f})
    elseif(f MATCHES "_bench\\.cc$")
      list(APPEND benches ${f})
    else()
      list(APPEND srcs ${f})
      if(f MATCHES "_avx2\\.cc$")
        set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${GLM_AVX2_FLAGS}")
      elseif(f MATCHES "_avxvnni\\.cc$")
        set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${GLM_AVXVNNI_FLAGS}")
      elseif(f MATCHES "_avx512\\.cc$")
        set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "${GLM_AVX512_FLAGS}")
      endif()
    endif()
  endforeach()
  set(deps "")
  foreach(d ${M_DEPS})
    list(APPEND deps glm_${d})
  endforeach()
  if(srcs)
    add_library(glm_${name} STATIC ${srcs})
    target_include_directories(glm_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(glm_${name} PUBLIC ${deps} ${M_LIBS} Threads::Threads)
  else()
    add_library(glm_${name} INTERFACE)
    target_include_directories(glm_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(glm_${name} INTERFACE ${deps} ${M_LIBS})
  endif()
  if(tests AND BUILD_TESTING)
    add_executable(${name}_test ${tests})
    target_link_libraries(${name}_test PRIVATE glm_${name} ${M_TEST_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
    target_compile_definitions(${name}_test PRIVATE
      GLM_SHARED_DATA="${PROJECT_SOURCE_DIR}/../shared/data"
      GLM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    glm_test_build(${name}_test)
    gtest_discover_tests(${name}_test DISCOVERY_MODE PRE_TEST
      WORKING_DIRECTORY ${CMAKE_BINARY_DIR} PROPERTIES TIMEOUT 600)
  endif()
  if(benches AND benchmark_FOUND)
    foreach(f ${benches})
      get_filename_component(bname ${f} NAME_WE)
      add_executable(${bname} ${f})
      target_link_libraries(${bname} PRIVATE glm_${name} ${M_TEST_LIBS} benchmark::benchmark)
      target_compile_definitions(${bname} PRIVATE
        GLM_SHARED_DATA="${PROJECT_SOURCE_DIR}/../shared/data")
    endforeach()
  endif()
  if(fuzzers AND GLM_FUZZ)
    foreach(f ${fuzzers})
      get_filename_component(fname ${f} NAME_WE)
      add_executable(${fname} ${f})
      target_compile_options(${fname} PRIVATE -fsanitize=fuzzer,address)
      target_link_options(${fname} PRIVATE -fsanitize=fuzzer,address)
      target_link_libraries(${fname} PRIVATE glm_${name})
    endforeach()
  endif()
endfunction()

# The shader-running tests of `target` (those matching `filter`, a gtest filter) once more for
# what lavapipe's default run cannot see, each as ctest entries of their own:
#   validated.*   under Khronos' validation layer with its GPU-assisted checks (gpu/validation.h:
#                 a shader's load or store outside every buffer fails the test), on the
#                 shaders' rolled build (gpu/shaders.h: the same sources, loops as written);
#   subgroup4.*, subgroup16.*   at llvmpipe's other subgroup sizes (its vector width: 8 lanes by
#                 default; GPUs run 32 or 64), so code written for any size runs at three;
#                 subgroup16.* also with the integer-dot matmuls, which lavapipe does not take
#                 by default (it does not accelerate them: gpu/ops.h, MatmulTuning::int_dot),
#                 and the activations alone inside the decode matmuls (MatmulTuning::fuse 2:
#                 the float matmuls' norms as dispatches of their own);
#   coop.*        with the prefill's matmul as on tensor cores (fp16 products), through its
#                 scalar twin: lavapipe has no cooperative matrices (MatmulTuning::coop); and
#                 the integer-dot decode, under the validation layer: an NVIDIA GPU's paths.
# validated.* also submits each step in parts of 3 dispatches (GLMSERVE_VULKAN_SUBMIT; the
# tests' steps are shorter than the default part), so the layer sees every part's command
# buffer reused only after it finished, and the models' results hold. subgroup4.* runs the
# models' norms and activations as dispatches of their own (where the default run fuses them
# into the decode matmuls: MatmulTuning::fuse).
# More variants may follow `filter`, as "prefix|VAR=value[|VAR2=value]": gpu_test's
#   partial32.*   subgroups of size 32 holding 16 invocations each: llvmpipe past its widest
#                 (512-bit) vectors, which runs them so although it says it gives full ones
#                 (its gl_NumSubgroups is 4 in a 64-wide workgroup). A driver may run partial
#                 subgroups where the pipeline asks for no full ones (gpu::DeviceInfo::
#                 full_subgroups); the shaders must hold either way.
function(glm_gpu_test_variants target filter)
  if(NOT BUILD_TESTING)
    return()
  endif()
  foreach(v "validated|GLMSERVE_VULKAN_VALIDATION=1|GLMSERVE_VULKAN_SUBMIT=3"
            "subgroup4|LP_NATIVE_VECTOR_WIDTH=128|GLMSERVE_VULKAN_MATMUL=2,2,16,-1,1,-1,0"
            "subgroup16|LP_NATIVE_VECTOR_WIDTH=512|GLMSERVE_VULKAN_MATMUL=2,2,16,1,1,-1,2"
            "coop|GLMSERVE_VULKAN_MATMUL=2,2,16,1,1,1|GLMSERVE_VULKAN_VALIDATION=1" ${ARGN})
    string(REPLACE "|" ";" parts "${v}")
    list(GET parts 0 prefix)
    list(GET parts 1 env)
    # gtest_discover_tests keeps one entry of a list-valued property (its PROPERTIES are
    # written out as one flat list), so a second variable goes in ENVIRONMENT_MODIFICATION.
    set(more "")
    list(LENGTH parts n_parts)
    if(n_parts GREATER 2)
      list(GET parts 2 second)
      string(REGEX REPLACE "^([^=]*)=" "\\1=set:" second "${second}")
      set(more ENVIRONMENT_MODIFICATION "${second}")
    endif()
    gtest_discover_tests(${target} DISCOVERY_MODE PRE_TEST TEST_PREFIX "${prefix}."
      TEST_FILTER "${filter}" WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
      PROPERTIES TIMEOUT 600 ENVIRONMENT "${env}" ${more})
  endforeach()
endfunction()
