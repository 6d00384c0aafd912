#include "runtime/kernel_family.hpp"

#include "runtime/cuda_check.hpp"

#include <cuda_runtime.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace vlattice::cuda {

namespace {

// Writes 1 where the code that runs on the device was built for sm_90a (wgmma, and the tensor
// memory accelerator's copies); a build for plain sm_90, or PTX compiled at load time, has neither.
__global__ void hopper_code_kernel(int* has) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *has = 1;
#else
    *has = 0;
#endif
}

struct GpuArch {
    int major = 0;
    int minor = 0;
    std::string name;
};

GpuArch arch_of(int gpu) {
    cudaDeviceProp properties{};
    CUDA_CHECK(cudaGetDeviceProperties(&properties, gpu));
    return {properties.major, properties.minor, properties.name};
}

// Asked on `gpu`, which becomes the thread's device, once per process: every backend (a budget's
// sub-space fits make many) would otherwise launch and wait on the legacy stream.
bool ask_hopper_code(int gpu) {
    CUDA_CHECK(cudaSetDevice(gpu));
    int* flag = nullptr;
    CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
    hopper_code_kernel<<<1, 1>>>(flag);
    int has = 0;
    cudaError_t status = cudaGetLastError();
    if (status == cudaSuccess) {
        status = cudaMemcpy(&has, flag, sizeof(int), cudaMemcpyDeviceToHost);
    }
    static_cast<void>(cudaFree(flag));
    if (status != cudaSuccess) {
        throw Error(std::string("hopper_code_kernel: ") + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
    }
    return has == 1;
}

bool has_hopper_code(int gpu) {
    static std::mutex lock;
    static std::map<int, bool> known;
    const std::lock_guard<std::mutex> held(lock);
    const auto found = known.find(gpu);
    if (found != known.end()) {
        CUDA_CHECK(cudaSetDevice(gpu));
        return found->second;
    }
    const bool has = ask_hopper_code(gpu);
    known.emplace(gpu, has);
    return has;
}

GpuKernels fastest(const GpuArch& arch, bool hopper_code) {
    if (arch.major == 9 && arch.minor == 0 && hopper_code) {
        return GpuKernels::hopper;
    }
    return arch.major >= 8 ? GpuKernels::portable : GpuKernels::cuda_cores;
}

std::string described(const GpuArch& arch, int gpu) {
    return "GPU " + std::to_string(gpu) + " (" + arch.name + ", sm_" + std::to_string(arch.major) +
           std::to_string(arch.minor) + ")";
}

}  // namespace

GpuKernels resolve_kernels(GpuKernels requested, int gpu) {
    std::string source = "--kernel";
    if (requested == GpuKernels::automatic) {
        if (const char* forced = std::getenv("VLATTICE_KERNEL"); forced != nullptr && *forced != '\0') {
            requested = parse_gpu_kernels(forced, "VLATTICE_KERNEL");
            source = "VLATTICE_KERNEL";
        }
    }
    const GpuArch arch = arch_of(gpu);
    switch (requested) {
    case GpuKernels::automatic:
        return fastest(arch, has_hopper_code(gpu));
    case GpuKernels::hopper:
        if (arch.major != 9 || arch.minor != 0) {
            throw Error(source + " hopper: " + described(arch, gpu) + " is not a Hopper GPU (sm_90)");
        }
        if (!has_hopper_code(gpu)) {
            throw Error(source + " hopper: this build has no sm_90a code; configure with CMAKE_CUDA_ARCHITECTURES "
                                 "including 90a");
        }
        return requested;
    case GpuKernels::portable:
        if (arch.major < 8) {
            throw Error(source + " portable: " + described(arch, gpu) + " predates Ampere (sm_80); use cuda-cores");
        }
        return requested;
    case GpuKernels::cuda_cores:
        return requested;
    }
    return requested;
}

GpuKernels fastest_kernels(int gpu) {
    try {
        return fastest(arch_of(gpu), has_hopper_code(gpu));
    } catch (const Error&) {
        return GpuKernels::cuda_cores;
    }
}

}  // namespace vlattice::cuda
