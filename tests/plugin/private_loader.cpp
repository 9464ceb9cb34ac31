// Loads a library privately (dlopen with RTLD_LOCAL, as Python loads extension modules) and asks
// it for the backends: private_loader LIBRARY.

#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: private_loader LIBRARY\n");
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::printf("dlopen failed: %s\n", dlerror());
    return 1;
  }
  auto list = reinterpret_cast<void (*)()>(dlsym(library, "sluice_test_list_backends"));
  if (list == nullptr) {
    std::printf("dlsym failed: %s\n", dlerror());
    return 1;
  }
  list();
  std::printf("probe: ok\n");
  return 0;
}
