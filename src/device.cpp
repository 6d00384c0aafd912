#include "vlattice/device.hpp"

#include "vlattice/cpu_backend.hpp"

#ifdef VLATTICE_HAVE_CUDA
#include "runtime/gpu_probe.hpp"
#include "vlattice/cuda_backend.hpp"
#endif

namespace vlattice {

GpuStatus gpu_status(int gpu) {
#ifdef VLATTICE_HAVE_CUDA
    const cuda::GpuProbe probe = cuda::probe_gpu(gpu);
    return {probe.usable, probe.description};
#else
    (void)gpu;
    return {false, "this build has no CUDA support (configured with VLATTICE_CUDA=OFF or without nvcc)"};
#endif
}

int gpu_count() {
#ifdef VLATTICE_HAVE_CUDA
    return cuda::gpu_count();
#else
    return 0;
#endif
}

DeviceKind parse_device(const std::string& name) {
    if (name == "auto") {
        return DeviceKind::automatic;
    }
    if (name == "cpu") {
        return DeviceKind::cpu;
    }
    if (name == "cuda") {
        return DeviceKind::cuda;
    }
    throw Error("--device: expected auto, cpu or cuda, got '" + name + "'");
}

GpuKernels parse_gpu_kernels(const std::string& name, const std::string& what) {
    for (const GpuKernels kernels :
         {GpuKernels::automatic, GpuKernels::hopper, GpuKernels::portable, GpuKernels::cuda_cores}) {
        if (name == gpu_kernels_name(kernels)) {
            return kernels;
        }
    }
    throw Error(what + ": expected auto, hopper, portable or cuda-cores, got '" + name + "'");
}

const char* gpu_kernels_name(GpuKernels kernels) {
    switch (kernels) {
    case GpuKernels::automatic:
        return "auto";
    case GpuKernels::hopper:
        return "hopper";
    case GpuKernels::portable:
        return "portable";
    case GpuKernels::cuda_cores:
        return "cuda-cores";
    }
    return "auto";
}

namespace {

// The CPU backend, with the note of plan_cpu_threads after `why` the run is on the CPU.
BackendChoice cpu_choice(int threads, const std::string& why) {
    const CpuThreads plan = plan_cpu_threads(threads);
    const std::string note = why.empty() || plan.note.empty() ? why + plan.note : why + "; " + plan.note;
    return {make_cpu_backend(plan.threads), note};
}

}  // namespace

BackendChoice make_backend(DeviceKind kind, int gpu, int threads, GpuKernels kernels, std::size_t gpu_memory) {
    if (kind == DeviceKind::cpu) {
        return cpu_choice(threads, "");
    }
    const GpuStatus status = gpu_status(gpu);
#ifdef VLATTICE_HAVE_CUDA
    if (status.usable) {
        if (kind == DeviceKind::cuda) {
            return {make_cuda_backend(gpu, FastKernel::automatic, kGatherFloats, kernels, gpu_memory), ""};
        }
        // `auto` promises a run: a GPU that is present but cannot start one (too little memory,
        // an architecture this build has no code for) sends it to the CPU, with the reason.
        try {
            return {make_cuda_backend(gpu, FastKernel::automatic, kGatherFloats, kernels, gpu_memory), ""};
        } catch (const Error& e) {
            return cpu_choice(threads, std::string("GPU ") + status.description + " unusable (" + e.what() +
                                           "); running on the CPU");
        }
    }
#else
    static_cast<void>(kernels);
    static_cast<void>(gpu_memory);
#endif
    const std::string why = "no usable GPU: " + status.description;
    if (kind == DeviceKind::cuda) {
        throw Error("--device cuda: " + why + "; use --device cpu");
    }
    return cpu_choice(threads, why + "; running on the CPU");
}

GpuChoice choose_gpu(DeviceKind kind, int gpu) {
    if (kind == DeviceKind::cpu) {
        return {};
    }
    const GpuStatus status = gpu_status(gpu);
    if (status.usable) {
        return {true, ""};
    }
    const std::string why = "no usable GPU: " + status.description;
    if (kind == DeviceKind::cuda) {
        throw Error("--device cuda: " + why + "; use --device cpu");
    }
    return {false, why + "; running on the CPU"};
}

}  // namespace vlattice
