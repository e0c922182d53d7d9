// flashkv — command-line front end. Subcommands are added per milestone; output formats stay stable.
#include <cstdio>
#include <string_view>

int main(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) == "--help") {
    std::puts("usage: flashkv info PATH [--json]");
    return argc < 2 ? 2 : 0;
  }
  std::fprintf(stderr, "flashkv: unknown command '%s'\n", argv[1]);
  return 2;
}
