# Finds pybind11 through the Python interpreter's own pybind11 package (pip install pybind11, as scripts/setup and
# pyproject.toml's build requirements do), so no system-wide pybind11 CMake package is needed. Sets
# pybind11_FOUND; the caller decides whether a missing pybind11 is an error. Included by python/ (the package's
# module) and tests/python (flashkv_testing), in their own directory scope.
find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
if(Python3_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import pybind11; print(pybind11.get_cmake_dir())"
                  OUTPUT_VARIABLE _pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  find_package(pybind11 CONFIG QUIET HINTS ${_pybind11_dir})
endif()
