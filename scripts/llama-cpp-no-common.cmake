# Included by CMake when the vendored llama.cpp project starts (CMAKE_PROJECT_llama.cpp_INCLUDE, set by
# scripts/bootstrap): llama-cpp-python forces llama.cpp's `common` library on, but its Python binding
# loads only libllama and libggml*, so the first build skips the 52 heaviest of its 135 steps.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
