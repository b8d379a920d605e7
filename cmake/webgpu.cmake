# ---------------------------------------------------------------------------------------------------------
# WebGPU backend (src/webgpu). Included from the top-level CMakeLists.txt after the `llamaweb` target.
#  - Embeds src/webgpu/shaders/*.wgsl into the library as a C table, generated at build time into the build
#    directory (never committed): lw__wgsl_builtin() in webgpu/wgsl-pp.h.
#  - Under Emscripten (scripts/build-wasm.sh), links the wasm module `llamaweb-wasm` with the project's own
#    WebGPU glue (web/lw-gpu.js, against today's WebGPU JS API; not -sUSE_WEBGPU).
# ---------------------------------------------------------------------------------------------------------
file(GLOB LW_WGSL_SHADERS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/webgpu/shaders/*.wgsl)
set(LW_WGSL_C ${CMAKE_BINARY_DIR}/generated/wgsl-shaders.c)
add_custom_command(
  OUTPUT ${LW_WGSL_C}
  COMMAND ${CMAKE_COMMAND} -DDIR=${CMAKE_SOURCE_DIR}/src/webgpu/shaders -DOUT=${LW_WGSL_C}
          -P ${CMAKE_SOURCE_DIR}/cmake/wgsl-embed.cmake
  DEPENDS ${LW_WGSL_SHADERS} ${CMAKE_SOURCE_DIR}/cmake/wgsl-embed.cmake
  COMMENT "Embedding WGSL shaders"
  VERBATIM)
target_sources(llamaweb PRIVATE ${LW_WGSL_C})

if(EMSCRIPTEN)
  file(GLOB LW_WASM_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/web/*.c)
  add_executable(llamaweb-wasm ${LW_WASM_SOURCES})
  target_include_directories(llamaweb-wasm PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(llamaweb-wasm PRIVATE llamaweb)
  target_compile_options(llamaweb PRIVATE -msimd128) # wasm SIMD (src/cpu/quant-dot-wasm.c); every current browser has it
  set(LW_WASM_JSLIB ${CMAKE_SOURCE_DIR}/web/lw-gpu.js)
  set_property(TARGET llamaweb-wasm APPEND PROPERTY LINK_DEPENDS ${LW_WASM_JSLIB})
  target_link_options(llamaweb-wasm PRIVATE
    --js-library=${LW_WASM_JSLIB}
    -sMODULARIZE=1 -sEXPORT_NAME=createLlamaweb -sENVIRONMENT=web,worker,node
    -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB
    -sEXPORTED_FUNCTIONS=@${CMAKE_SOURCE_DIR}/web/exports.txt
    -sEXPORTED_RUNTIME_METHODS=ccall,cwrap,UTF8ToString,stringToUTF8,lengthBytesUTF8
    -sFILESYSTEM=0)
endif()
