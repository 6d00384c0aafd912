// search_cuda (include/vlattice/cuda_search.hpp): the file goes up once (product codes in the CPU's
// scan layout, with their per-vector terms computed there), then the queries a batch at a time
// (cuda/search/search.cuh), each batch's results coming back before the next starts.
#include "vlattice/cuda_search.hpp"

#include "codes/product_scan.hpp"
#include "fit/member_lists.hpp"
#include "search/search_scores.hpp"

#include "runtime/device_buffer.hpp"
#include "runtime/select_gpu.hpp"
#include "runtime/stream.hpp"
#include "search/device_codes.cuh"
#include "search/device_product.cuh"
#include "search/search.cuh"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>

namespace vlattice {

Neighbors search_cuda(const VlatFile& file, const Matrix& queries, const SearchOptions& options, int gpu) {
    const Matrix& anchors = file.anchors;
    const std::size_t d = anchors.cols;
    const std::size_t m = anchors.rows;
    check_search(file, queries, options);
    const std::size_t k = options.k;
    const std::size_t nprobe = options.nprobe == 0 ? m : std::min(options.nprobe, m);
    const bool product = file.codec == ResidualCodec::product;
    // Product codes go up in the scan's layout, which holds the member lists too.
    ProductScan scan;
    if (product) {
        scan = product_scan(file);
    } else {
        scan.lists = member_lists(file.assignments, m);
    }
    const MemberLists& lists = scan.lists;
    cuda::select_gpu(gpu);

    Neighbors out;
    out.queries = queries.rows;
    out.k = k;
    out.ids.assign(queries.rows * k, -1);
    out.distances.assign(queries.rows * k, std::numeric_limits<float>::infinity());
    if (queries.rows == 0 || nprobe == 0 || lists.members.empty()) {
        scores_to_distances(out, file.metric);
        return out;  // nothing to visit
    }

    cuda::Stream stream;
    const cudaStream_t s = stream.get();
    const cuda::DeviceCodes codes(anchors, file.residuals, s);
    std::optional<cuda::DeviceProduct> product_codes;
    if (product) {
        product_codes.emplace(file, scan, s);
    }
    cuda::DeviceBuffer<std::size_t> start(lists.start.size());
    cuda::DeviceBuffer<std::uint32_t> members(lists.members.size());
    CUDA_CHECK(cudaMemcpyAsync(start.data(), lists.start.data(), start.bytes(), cudaMemcpyHostToDevice, s));
    CUDA_CHECK(cudaMemcpyAsync(members.data(), lists.members.data(), members.bytes(), cudaMemcpyHostToDevice, s));

    cuda::SearchData data;
    data.codes = codes.view();
    data.m = m;
    data.start = start.data();
    data.members = members.data();
    data.nprobe = nprobe;
    data.k = k;
    data.inner_product = file.metric == Metric::ip;
    if (product_codes) {
        data.product = product_codes->view();
        data.rerank = options.rerank;
    }

    const std::size_t per_query = product ? cuda::table_values(data.product) : 0;
    const std::size_t batch = std::min(queries.rows, cuda::search_batch_queries(m, d, k, per_query));
    cuda::DeviceBuffer<float> batch_queries(batch * d);
    cuda::DeviceBuffer<std::int64_t> ids(batch * k);
    cuda::DeviceBuffer<float> distances(batch * k);
    cuda::SearchScratch scratch;
    for (std::size_t first = 0; first < queries.rows; first += batch) {
        const std::size_t count = std::min(batch, queries.rows - first);
        CUDA_CHECK(cudaMemcpyAsync(batch_queries.data(), queries.row(first), count * d * sizeof(float),
                                   cudaMemcpyHostToDevice, s));
        out.visited += cuda::search_batch(data, batch_queries.data(), count, ids.data(), distances.data(), scratch, s);
        CUDA_CHECK(cudaMemcpyAsync(out.ids.data() + first * k, ids.data(), count * k * sizeof(std::int64_t),
                                   cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaMemcpyAsync(out.distances.data() + first * k, distances.data(), count * k * sizeof(float),
                                   cudaMemcpyDeviceToHost, s));
        stream.synchronize();
    }
    scores_to_distances(out, file.metric);
    return out;
}

}  // namespace vlattice
