# FLASHKV_CUDA=AUTO|ON|OFF. With AUTO the CUDA backend is built whenever nvcc is found, so a machine
# without a GPU (CI) still catches CUDA build breaks. Code is generated for Hopper only: sm_90a machine
# code (wgmma, setmaxnreg) plus compute_90 PTX so a newer driver can JIT it.
set(FLASHKV_HAVE_CUDA OFF)
if(NOT FLASHKV_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES OFF)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # CUDA translation units are C++17: CMake 3.25 does not know nvcc's C++20 dialect, and fmt's
    # consteval format checks do not compile under nvcc. Headers shared with .cu files stay C++17.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(FLASHKV_CUDA_GENCODE
        "-gencode=arch=compute_90a,code=sm_90a" "-gencode=arch=compute_90,code=compute_90")
    set(FLASHKV_HAVE_CUDA ON)
  elseif(FLASHKV_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FLASHKV_CUDA=ON but no CUDA compiler was found (set CUDACXX or put nvcc on PATH)")
  endif()
endif()

# Apply the project's CUDA flags to a target that has .cu sources.
function(flashkv_cuda_target target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:${FLASHKV_CUDA_GENCODE} --expt-relaxed-constexpr -lineinfo>)
  set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
endfunction()
