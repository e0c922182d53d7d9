#include <flashkv/error.hpp>

#include "catch.hpp"

TEST_CASE("fail() throws Error carrying the code and the formatted message") {
  try {
    flashkv::fail(flashkv::ErrorCode::kInvalidConfig, "field '{}' must be > {}", "hidden_size", 0);
    FAIL("fail() returned");
  } catch (const flashkv::Error& e) {
    CHECK(e.code() == flashkv::ErrorCode::kInvalidConfig);
    CHECK(std::string(e.what()) == "field 'hidden_size' must be > 0");
    CHECK(flashkv::error_code_name(e.code()) == "invalid_config");
  }
}
