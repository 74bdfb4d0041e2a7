# Every dependency comes from a Debian package (scripts/install-deps.sh installs them).
find_package(Torch REQUIRED)   # imported targets torch, torch_library, c10
find_package(Boost 1.74 REQUIRED COMPONENTS serialization)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
