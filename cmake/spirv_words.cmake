# cmake -DIN=shader.spv -DOUT=shader.inc -P spirv_words.cmake: the SPIR-V binary IN (its words
# little-endian, as spirv-opt writes them here) as C numbers, comma-separated (glslc -mfmt=num's
# form), for an array initializer in the generated shader table (src/gpu/CMakeLists.txt).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR rem "${n} % 8")
if(n EQUAL 0 OR NOT rem EQUAL 0)
  message(FATAL_ERROR "${IN}: not a whole number of 32-bit words (${n} hex digits)")
endif()
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1,\n" words "${hex}")
file(WRITE "${OUT}" "${words}")
