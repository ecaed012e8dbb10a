# User-facing build options.
set(GDN_WITH_CUDA "AUTO" CACHE STRING "Build the CUDA backend: AUTO (when nvcc is found), ON, OFF")
set_property(CACHE GDN_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
set(GDN_CUDA_ARCHITECTURES "90a" CACHE STRING "CUDA architectures of the CUDA backend (90a: H100/H200)")
option(GDN_BUILD_BENCHMARKS "Build the kernel benchmarks" ON)
