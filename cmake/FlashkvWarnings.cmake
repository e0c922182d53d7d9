# Every flashkv target compiles warning-free: -Wall -Wextra -Werror (and the host side of CUDA code too).
add_library(flashkv_warnings INTERFACE)
target_compile_options(flashkv_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wshadow -Wconversion -Wno-sign-conversion>
  $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror>)
