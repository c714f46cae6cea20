// Temporary entry point; replaced by the real CLI in this issue.
#include <cstdio>
int main() { std::fprintf(stderr, "sezm-eval: under construction\n"); return 1; }
