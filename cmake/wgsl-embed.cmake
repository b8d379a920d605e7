# Writes a C table of every src/webgpu/shaders/*.wgsl file (lw__wgsl_builtin, declared in webgpu/wgsl-pp.h).
# Run as a build step (cmake -DDIR=<shaders dir> -DOUT=<file.c> -P wgsl-embed.cmake); the bytes are emitted
# as hex so no shader text needs escaping. The output is rewritten only when it changes.
if(NOT DIR OR NOT OUT)
  message(FATAL_ERROR "wgsl-embed.cmake: pass -DDIR=<shader dir> -DOUT=<output .c>")
endif()
file(GLOB names RELATIVE ${DIR} ${DIR}/*.wgsl)
list(SORT names)
set(arrays "")
set(table "")
set(i 0)
foreach(name ${names})
  file(READ ${DIR}/${name} hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){20})" "\\1\n    " hex "${hex}")
  string(APPEND arrays "/* ${name} */\nstatic const char shader_${i}[] = {\n    ${hex}0x00};\n\n")
  string(APPEND table "    {\"${name}\", shader_${i}},\n")
  math(EXPR i "${i} + 1")
endforeach()
if(i EQUAL 0)
  set(table "    {0, 0},\n")
endif()
set(text "/* Generated at build time by cmake/wgsl-embed.cmake from the .wgsl files of src/webgpu/shaders: do not edit. */
#include \"webgpu/wgsl-pp.h\"

${arrays}static const lw__wgsl_file table[] = {
${table}};

const lw__wgsl_file *lw__wgsl_builtin(size_t *n_files) {
    if (n_files) *n_files = ${i};
    return table;
}
")
file(WRITE ${OUT}.tmp "${text}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
