// One include for Catch2 v2 (Debian 12) and v3 (the GPU machine).
#pragma once
#if defined(FLASHKV_CATCH2_V3)
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#else
#include <catch2/catch.hpp>
#endif
