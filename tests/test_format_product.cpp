// .vlat version 3 (product codes) and models (n = 0) against docs/format.md: exact round trips, the
// section layouts, every way the product sections can be damaged producing an Error that names the
// file, the section and the spot, and version 1 and 2 files written before version 3 existed.
#include "product_sample.hpp"
#include "support.hpp"
#include "vlat_bytes.hpp"

#include "vlattice/codec.hpp"
#include "vlattice/format.hpp"
#include "vlattice/half.hpp"
#include "vlattice/pipeline.hpp"
#include "vlattice/product_codes.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

using Catch::Contains;
using Catch::StartsWith;
using namespace vlattice;
using namespace vlattice::test;

namespace {

// The payload offsets of docs/format.md, "Product codes".
std::size_t rotation_at(std::size_t d, std::size_t t, std::size_t k) {
    return 4 + 4 * (t * d + k);
}
std::size_t bound_at(std::size_t j) {
    return 8 + 4 * j;
}
std::size_t centroid_at(std::size_t subspaces, std::size_t p, std::size_t c, std::size_t t) {
    return 8 + 4 * (subspaces + 1) + 4 * (c * p + t);
}

// A written version 3 file and its bytes, for the tests that damage it: d = 10, p = 7, M = 3 codes
// of 4 bits (odd M: the high nibble of each vector's second code byte is unused).
struct Written3 {
    static constexpr std::uint32_t d = 10;
    static constexpr std::size_t p = 7;
    static constexpr std::size_t subspaces = 3;
    static constexpr std::uint64_t n = 50;
    ScratchDir dir;
    std::string path = dir.path("product.vlat");
    VlatFile file;
    std::string bytes;
    std::vector<VlatSection> sections;

    Written3() {
        std::mt19937_64 rng(seed());
        file = product_sample(rng, n, d, 5, p, 4, subspaces);
        write_vlat(path, file);
        bytes = read_file(path);
        sections = read_vlat(path).sections;
    }

    const VlatSection& section(const std::string& tag) const {
        for (const VlatSection& s : sections) {
            if (s.tag == tag) {
                return s;
            }
        }
        FAIL("no section " << tag);
        return sections.front();
    }
    std::string payload(const std::string& tag) const {
        return bytes.substr(section(tag).offset, section(tag).length);
    }
    // The file with `tag`'s payload (same length) changed by `change`, checksum recomputed.
    template <class Change>
    std::string changed(const std::string& tag, Change change) const {
        std::string body = payload(tag);
        change(body);
        return with_payload(bytes, section(tag), body);
    }
    std::string put(const std::string& damaged) const {
        const std::string at = dir.path("damaged.vlat");
        write_file(at, damaged);
        return at;
    }
    void rejects(const std::string& damaged, const std::string& message) const {
        INFO(message);
        CHECK_THROWS_WITH(read_vlat(put(damaged)), StartsWith(dir.path("damaged.vlat")) && Contains(message));
    }
};

// The decoded vector by the formula of docs/format.md, written out here: s starts at 0 and adds
// R[t][k] * z[t] for t = 0, 1, ..., p - 1 in float; then y[k] = c[k] + s[k].
std::vector<float> decode_by_the_document(const VlatFile& file, std::size_t i) {
    const ProductCodebook& book = file.product.book;
    const std::uint8_t* code = file.product.codes.data() + i * book.code_bytes();
    std::vector<float> s(file.d, 0.0f);
    for (std::size_t j = 0; j < book.subspaces(); ++j) {
        const unsigned c = get_code(code, book.bits, j);
        for (std::size_t t = book.bounds[j]; t < book.bounds[j + 1]; ++t) {
            for (std::size_t k = 0; k < file.d; ++k) {
                s[k] += book.rotation.row(t)[k] * book.centroids.row(c)[t];
            }
        }
    }
    const float* anchor = file.anchors.row(file.assignments[i]);
    for (std::size_t k = 0; k < file.d; ++k) {
        s[k] = anchor[k] + s[k];
    }
    return s;
}

void round_anchors_to_half(Matrix& anchors) {
    for (float& value : anchors.data) {
        value = half_to_float(float_to_half(value));
    }
}

// A product-coded sample's shape: d, p rotated dimensions, b bits, M sub-spaces, S stages.
struct Shape {
    std::uint32_t d;
    std::size_t p;
    unsigned bits;
    std::size_t subspaces;
    std::size_t stages = 1;
};

}  // namespace

TEST_CASE("product codes round-trip exactly through a version 3 file", "[format][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    // b = 4 with M odd (a spare nibble per vector) and even, b = 8, b = 12 with M odd (codes across
    // byte boundaries, a spare nibble) and even, p < d and p = d, M = p.
    for (const Shape shape : {Shape{10, 7, 4, 3}, Shape{6, 6, 8, 4}, Shape{5, 5, 4, 5}, Shape{9, 4, 4, 2},
                              Shape{10, 7, 12, 3}, Shape{6, 6, 12, 2}}) {
        for (const AnchorStorage storage : {AnchorStorage::f32, AnchorStorage::f16}) {
            INFO("d " << shape.d << ", p " << shape.p << ", bits " << shape.bits << ", M " << shape.subspaces
                      << ", f16 " << (storage == AnchorStorage::f16));
            ScratchDir dir;
            const std::string path = dir.path("v3.vlat");
            const std::uint64_t n = 300;
            VlatFile file = product_sample(rng, n, shape.d, 17, shape.p, shape.bits, shape.subspaces);
            file.anchor_storage = storage;
            if (storage == AnchorStorage::f16) {
                round_anchors_to_half(file.anchors);
            }
            write_vlat(path, file);
            const VlatFile back = read_vlat(path);

            CHECK(format_version(back) == kVlatVersionProduct);
            CHECK(back.codec == ResidualCodec::product);
            CHECK(back.residuals.empty());
            CHECK(back.anchor_storage == storage);
            CHECK(back.anchors.data == file.anchors.data);
            CHECK(back.assignments == file.assignments);
            CHECK(back.product.book.bits == shape.bits);
            CHECK(back.product.book.bounds == file.product.book.bounds);
            CHECK(back.product.book.rotation.rows == shape.p);
            CHECK(back.product.book.rotation.cols == shape.d);
            CHECK(back.product.book.rotation.data == file.product.book.rotation.data);
            CHECK(back.product.book.centroids.rows == (std::size_t{1} << shape.bits));
            CHECK(back.product.book.centroids.data == file.product.book.centroids.data);
            CHECK(back.product.codes == file.product.codes);
            CHECK(back.metadata_json == file.metadata_json);

            const std::string bytes = read_file(path);
            CHECK(value_at<std::uint32_t>(bytes, kVersionOffset) == 3);
            CHECK(static_cast<unsigned>(bytes[kCodecOffset]) == 2);
            CHECK(value_at<std::uint32_t>(bytes, kSectionCountOffset) == 6);
            const std::size_t code_bytes = (shape.subspaces * shape.bits + 7) / 8;
            const std::vector<std::string> tags = {"ANCH", "ASGN", "ROTN", "CDBK", "CODE", "META"};
            const std::vector<std::uint64_t> lengths = {
                17 * shape.d * (storage == AnchorStorage::f16 ? 2u : 4u),
                (n * assignment_bits(17) + 7) / 8,
                4 + 4 * shape.p * shape.d,
                8 + 4 * (shape.subspaces + 1) + 4 * (std::uint64_t{1} << shape.bits) * shape.p,
                n * code_bytes,
                file.metadata_json.size()};
            REQUIRE(back.sections.size() == tags.size());
            std::uint64_t offset = kHeaderBytes;
            for (std::size_t i = 0; i < tags.size(); ++i) {
                CHECK(back.sections[i].tag == tags[i]);
                CHECK(back.sections[i].offset == offset + kSectionHeadBytes);
                CHECK(back.sections[i].length == lengths[i]);
                offset = back.sections[i].offset + back.sections[i].length + 8;
            }
            CHECK(offset == bytes.size());

            // The payload fields where docs/format.md puts them.
            const std::string rotn = bytes.substr(back.sections[2].offset, back.sections[2].length);
            const std::string cdbk = bytes.substr(back.sections[3].offset, back.sections[3].length);
            const std::string code = bytes.substr(back.sections[4].offset, back.sections[4].length);
            CHECK(value_at<std::uint32_t>(rotn, 0) == shape.p);
            CHECK(value_at<float>(rotn, rotation_at(shape.d, shape.p - 1, 2)) ==
                  file.product.book.rotation.row(shape.p - 1)[2]);
            CHECK(static_cast<unsigned>(cdbk[0]) == shape.bits);
            CHECK(cdbk.substr(1, 3) == std::string(3, '\0'));
            CHECK(value_at<std::uint32_t>(cdbk, 4) == shape.subspaces);
            for (std::size_t j = 0; j <= shape.subspaces; ++j) {
                CHECK(value_at<std::uint32_t>(cdbk, bound_at(j)) == file.product.book.bounds[j]);
            }
            CHECK(value_at<float>(cdbk, centroid_at(shape.subspaces, shape.p, 3, shape.p - 1)) ==
                  file.product.book.centroids.row(3)[shape.p - 1]);
            CHECK(code == std::string(file.product.codes.begin(), file.product.codes.end()));

            const Matrix decoded = reconstruct(back);
            REQUIRE(decoded.rows == n);
            for (const std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{n / 2}, std::size_t{n - 1}}) {
                const std::vector<float> expected = decode_by_the_document(file, i);
                CHECK(std::vector<float>(decoded.row(i), decoded.row(i) + shape.d) == expected);
            }
            CHECK(code_bytes_per_vector(back) ==
                  Approx((std::ceil(n * assignment_bits(17) / 8.0) + static_cast<double>(n * code_bytes)) / n));
        }
    }
}

// The decoded vector of a file with additive stages by docs/format.md, written out here: z[t] is
// stage 0's centroid value, each later stage's added in order; then the version 3 formula.
std::vector<float> decode_stages_by_the_document(const VlatFile& file, std::size_t i) {
    const ProductCodebook& book = file.product.book;
    const std::size_t subspaces = book.subspaces();
    const std::uint8_t* code = file.product.codes.data() + i * book.code_bytes();
    std::vector<float> z(book.coded_dims());
    for (std::size_t j = 0; j < book.stages * subspaces; ++j) {
        const unsigned c = get_code(code, book.bits, j);
        const float* centroid = book.centroids.row((j / subspaces << book.bits) + c);
        for (std::size_t t = book.bounds[j % subspaces]; t < book.bounds[j % subspaces + 1]; ++t) {
            z[t] = j < subspaces ? centroid[t] : z[t] + centroid[t];
        }
    }
    std::vector<float> s(file.d, 0.0f);
    for (std::size_t t = 0; t < z.size(); ++t) {
        for (std::size_t k = 0; k < file.d; ++k) {
            s[k] += book.rotation.row(t)[k] * z[t];
        }
    }
    const float* anchor = file.anchors.row(file.assignments[i]);
    for (std::size_t k = 0; k < file.d; ++k) {
        s[k] = anchor[k] + s[k];
    }
    return s;
}

TEST_CASE("additive stages round-trip exactly through a version 4 file", "[format][product][stages]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    // Residual codes (M = 1) of 8 and of 4 bits (an odd code count), stages of several sub-spaces.
    for (const Shape shape :
         {Shape{10, 7, 8, 1, 3}, Shape{6, 6, 4, 1, 5}, Shape{9, 4, 4, 2, 2}, Shape{9, 5, 12, 1, 3}}) {
        INFO("d " << shape.d << ", p " << shape.p << ", bits " << shape.bits << ", M " << shape.subspaces << ", S "
                  << shape.stages);
        ScratchDir dir;
        const std::string path = dir.path("v4.vlat");
        const std::uint64_t n = 200;
        const VlatFile file = product_sample(rng, n, shape.d, 11, shape.p, shape.bits, shape.subspaces, shape.stages);
        write_vlat(path, file);
        const VlatFile back = read_vlat(path);
        CHECK(format_version(back) == kVlatVersionStaged);
        CHECK(back.product.book.stages == shape.stages);
        CHECK(back.product.book.bounds == file.product.book.bounds);
        CHECK(back.product.book.rotation.data == file.product.book.rotation.data);
        CHECK(back.product.book.centroids.rows == shape.stages << shape.bits);
        CHECK(back.product.book.centroids.data == file.product.book.centroids.data);
        CHECK(back.product.codes == file.product.codes);

        const std::string bytes = read_file(path);
        CHECK(value_at<std::uint32_t>(bytes, kVersionOffset) == 4);
        CHECK(static_cast<unsigned>(bytes[kCodecOffset]) == 2);
        REQUIRE(back.sections.size() == 6);
        const std::string cdbk = bytes.substr(back.sections[3].offset, back.sections[3].length);
        CHECK(back.sections[3].length == 12 + 4 * (shape.subspaces + 1) + 4 * (shape.stages << shape.bits) * shape.p);
        CHECK(value_at<std::uint32_t>(cdbk, 4) == shape.subspaces);
        CHECK(value_at<std::uint32_t>(cdbk, 8) == shape.stages);
        CHECK(value_at<std::uint32_t>(cdbk, 12 + 4 * shape.subspaces) == shape.p);
        CHECK(back.sections[4].length == n * ((shape.stages * shape.subspaces * shape.bits + 7) / 8));

        const Matrix decoded = reconstruct(back);
        for (const std::size_t i : {std::size_t{0}, std::size_t{n / 2}, std::size_t{n - 1}}) {
            CHECK(std::vector<float>(decoded.row(i), decoded.row(i) + shape.d) ==
                  decode_stages_by_the_document(file, i));
        }
    }
}

TEST_CASE("read_vlat rejects a damaged version 4 codebook, naming the field", "[format][product][stages]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string path = dir.path("v4.vlat");
    write_vlat(path, product_sample(rng, 40, 6, 3, 5, 8, 1, 3));
    const std::string bytes = read_file(path);
    const VlatFile good = read_vlat(path);
    const VlatSection& cdbk = good.sections[3];
    const auto damaged = [&](std::uint32_t stages) {
        std::string body = bytes.substr(cdbk.offset, cdbk.length);
        std::memcpy(&body[8], &stages, sizeof stages);
        const std::string at = dir.path("damaged.vlat");
        write_file(at, with_payload(bytes, cdbk, body));
        return at;
    };
    CHECK_THROWS_WITH(read_vlat(damaged(1)), Contains("section CDBK: S = 1 stages (a version 4 file has 2 to 65536)"));
    CHECK_THROWS_WITH(read_vlat(damaged(0)), Contains("section CDBK: S = 0 stages"));
    CHECK_THROWS_WITH(read_vlat(damaged(4)), Contains("section CDBK has ") && Contains("S = 4 and p = 5 need"));
    // A length field of 10: too short for the head, checked before the payload is read.
    std::string short_head = bytes;
    const std::uint64_t ten = 10;
    std::memcpy(&short_head[cdbk.offset - sizeof ten], &ten, sizeof ten);
    const std::string cut = dir.path("cut.vlat");
    write_file(cut, short_head);
    CHECK_THROWS_WITH(read_vlat(cut), Contains("section CDBK has 10 bytes, fewer than the 12 of its code width, "
                                               "sub-space count and stage count"));
    // A version 3 header over a version 4 codebook reads the stage count as the first bound.
    const std::string as_v3 = dir.path("as-v3.vlat");
    write_file(as_v3, with_header_field(bytes, kVersionOffset, std::uint32_t{3}));
    CHECK_THROWS_AS(read_vlat(as_v3), Error);
}

TEST_CASE("writing the same version 3 file twice gives identical bytes", "[format][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    VlatFile file = product_sample(rng, 123, 8, 9, 6, 8, 3);
    write_vlat(dir.path("a.vlat"), file);
    file.sections.push_back({"JUNK", 1, 2, 3});
    write_vlat(dir.path("b.vlat"), file);
    CHECK(read_file(dir.path("a.vlat")) == read_file(dir.path("b.vlat")));
}

TEST_CASE("read_vlat rejects a version 3 header that does not fit", "[format][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    const Written3 w;
    w.rejects(with_header_field(w.bytes, kCodecOffset, std::uint8_t{1}),
              "residual codec code 1 in a version 3 file (which has 2)");
    w.rejects(with_header_field(w.bytes, kCodecOffset, std::uint8_t{3}),
              "residual codec code 3 in a version 3 file (which has 2)");
    w.rejects(with_header_field(w.bytes, kVersionOffset, std::uint32_t{2}),
              "residual codec code 2 in a version 2 file (which has 1)");
    w.rejects(with_header_field(w.bytes, kSectionCountOffset, std::uint32_t{4}), "missing section CODE");
}

TEST_CASE("read_vlat rejects damaged product sections, naming the section", "[format][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    const Written3 w;
    constexpr std::uint32_t d = Written3::d;
    constexpr std::size_t p = Written3::p;
    constexpr std::size_t subspaces = Written3::subspaces;
    const auto set_u32 = [](std::size_t at, std::uint32_t value) {
        return [=](std::string& body) { body.replace(at, 4, bytes_of(value)); };
    };
    const auto set_float = [](std::size_t at, float value) {
        return [=](std::string& body) { body.replace(at, 4, bytes_of(value)); };
    };

    // The fields a section opens with (ROTN's p, CDBK's bits and M) are checked before the checksum,
    // since the payload's length depends on them: see the sections below.
    SECTION("a flipped value byte in each product section is a checksum error") {
        for (const char* tag : {"ROTN", "CDBK", "CODE"}) {
            const VlatSection& section = w.section(tag);
            for (const std::uint64_t at : {section.offset + section.length / 2, section.offset + section.length - 1}) {
                std::string bytes = w.bytes;
                bytes[at] = static_cast<char>(bytes[at] ^ 0x04);
                w.rejects(bytes, std::string("section ") + tag + ": checksum mismatch (file damaged)");
            }
        }
    }
    SECTION("ROTN: p = 0, p > d, and a p that the length does not fit") {
        w.rejects(w.changed("ROTN", set_u32(0, 0)), "section ROTN: p = 0 rotated coordinates (must be 1 to the "
                                                    "dimension d = 10)");
        w.rejects(w.changed("ROTN", set_u32(0, 11)), "section ROTN: p = 11 rotated coordinates");
        w.rejects(w.changed("ROTN", set_u32(0, 6)), "section ROTN has 284 bytes, p = 6 and d = 10 need 244");
        w.rejects(with_section(w.bytes, w.section("ROTN"), std::string(3, '\0')),
                  "section ROTN has 3 bytes, fewer than the 4 of its row count p");
        w.rejects(with_section(w.bytes, w.section("ROTN"), w.payload("ROTN") + std::string(4, '\0')),
                  "section ROTN has 288 bytes, p = 7 and d = 10 need 284");
    }
    SECTION("CDBK: code widths other than 4 and 8, reserved bytes, M") {
        w.rejects(w.changed("CDBK", [](std::string& b) { b[0] = 5; }),
                  "section CDBK: codes of 5 bits (a sub-space code has 4, 8 or 12)");
        w.rejects(w.changed("CDBK", [](std::string& b) { b[0] = 0; }), "section CDBK: codes of 0 bits");
        w.rejects(w.changed("CDBK", [](std::string& b) { b[0] = 8; }),
                  "section CDBK has 472 bytes, bits = 8, M = 3 and p = 7 need 7192");
        w.rejects(w.changed("CDBK", [](std::string& b) { b[2] = 1; }), "section CDBK: reserved bytes 1 to 3 are not "
                                                                        "zero");
        w.rejects(w.changed("CDBK", set_u32(4, 0)), "section CDBK: M = 0 sub-spaces (must be 1 to p = 7");
        w.rejects(w.changed("CDBK", set_u32(4, 8)), "section CDBK: M = 8 sub-spaces (must be 1 to p = 7");
        w.rejects(w.changed("CDBK", set_u32(4, 2)), "section CDBK has 472 bytes, bits = 4, M = 2 and p = 7 need 468");
        w.rejects(with_section(w.bytes, w.section("CDBK"), std::string(7, '\0')),
                  "section CDBK has 7 bytes, fewer than the 8 of its code width and sub-space count");
    }
    SECTION("CDBK: bounds that do not increase from 0 to p") {
        w.rejects(w.changed("CDBK", set_u32(bound_at(0), 1)), "section CDBK: sub-space bound 0 is 1 (must be 0)");
        w.rejects(w.changed("CDBK", set_u32(bound_at(2), 2)),
                  "section CDBK: sub-space bound 2 is 2, not above bound 1 (2)");
        w.rejects(w.changed("CDBK", set_u32(bound_at(2), 9)), "sub-space bound 3 is 7, not above bound 2 (9)");
        w.rejects(w.changed("CDBK", set_u32(bound_at(3), 6)),
                  "section CDBK: the last sub-space bound is 6, but the rotation has p = 7 rows");
    }
    SECTION("CODE: a length other than n codes") {
        std::string codes = w.payload("CODE");
        w.rejects(with_section(w.bytes, w.section("CODE"), codes.substr(1)),
                  "section CODE has 99 bytes, n = 50 codes of M = 3 x 4 bits (2 bytes each) need 100");
    }
    SECTION("CODE: a nonzero unused high nibble (b = 4, M odd)") {
        const std::size_t at = 7 * 2 + 1;  // vector 7's second code byte holds sub-space 2 in its low nibble
        const std::string damaged = w.changed("CODE", [&](std::string& b) { b[at] = static_cast<char>(b[at] | 0x50); });
        const auto byte = static_cast<unsigned char>(damaged[w.section("CODE").offset + at]);
        char expected[8];
        std::snprintf(expected, sizeof expected, "0x%02x", static_cast<unsigned>(byte));
        w.rejects(damaged, std::string("section CODE: vector 7 ends in byte ") + expected +
                               ", but its high 4 bits hold no code (M = 3 codes of 4 bits) and must be zero");
    }
    SECTION("values that are not finite, naming the section, row and column") {
        w.rejects(w.changed("ROTN", set_float(rotation_at(d, 1, 2), std::numeric_limits<float>::quiet_NaN())),
                  "section ROTN: row 1, column 2 is nan (the rotation must be finite)");
        w.rejects(w.changed("CDBK", set_float(centroid_at(subspaces, p, 5, 1), std::numeric_limits<float>::infinity())),
                  "section CDBK: row 5, column 1 is inf (centroids must be finite)");
    }
    SECTION("a rotation whose rows are not orthonormal, naming the rows") {
        const Matrix& rotation = w.file.product.book.rotation;
        w.rejects(w.changed("ROTN",
                            [&](std::string& b) {
                                for (std::size_t k = 0; k < d; ++k) {
                                    b.replace(rotation_at(d, 1, k), 4, bytes_of(rotation.row(1)[k] * 1.01f));
                                }
                            }),
                  "section ROTN: row 1 has squared norm 1.02");
        w.rejects(w.changed("ROTN", [&](std::string& b) {
                      b.replace(rotation_at(d, 3, 0), 4 * d, b.substr(rotation_at(d, 2, 0), 4 * d));
                  }),
                  "section ROTN: rows 2 and 3 have dot product");
        CHECK_THROWS_WITH(read_vlat(w.put(w.changed("ROTN", set_float(rotation_at(d, 4, 4), 0.5f)))),
                          Contains("(the rotation's rows must be orthonormal: R R^T = I to 0.0001)"));
    }
    SECTION("centroids too large to decode to finite values") {
        // Each value is finite and below FLT_MAX / 2; their sum over the rotated coordinates is not.
        w.rejects(w.changed("CDBK",
                            [&](std::string& b) {
                                for (std::size_t t = 0; t < 3; ++t) {
                                    b.replace(centroid_at(subspaces, p, 9, t), 4, bytes_of(-1e38f));
                                }
                            }),
                  "section CDBK: the largest anchor magnitude");
        CHECK_THROWS_WITH(read_vlat(w.put(w.changed("CDBK", set_float(centroid_at(subspaces, p, 0, 6), 2e38f)))),
                          Contains("not below FLT_MAX / 2 = 1.70141173e+38, so a decoded value could overflow"));
        // One value of 1e38 stays below the bound, and every vector decodes to finite values.
        const VlatFile large = read_vlat(w.put(w.changed("CDBK", set_float(centroid_at(subspaces, p, 0, 6), 1e38f))));
        const Matrix decoded = reconstruct(large);
        CHECK(std::all_of(decoded.data.begin(), decoded.data.end(), [](float v) { return std::isfinite(v); }));
    }
    SECTION("sections of version 3 out of place or in another version") {
        std::string bytes = w.bytes;
        bytes.replace(w.section("ROTN").offset - kSectionHeadBytes, 4, "CDBK");
        w.rejects(bytes, "section CDBK at offset");
        w.rejects(bytes, "is out of place (.vlat version 3 has ANCH, ASGN, ROTN, CDBK, CODE, META once each");
        bytes = w.bytes;
        bytes.replace(w.section("ROTN").offset - kSectionHeadBytes, 4, "RESI");
        w.rejects(bytes, "section RESI at offset");
    }
}

TEST_CASE("every cut and every changed byte of a version 3 file is an Error", "[format][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string path = dir.path("small.vlat");
    VlatFile file = product_sample(rng, 6, 4, 2, 3, 4, 3);
    file.metadata_json = "{}";
    write_vlat(path, file);
    const std::string bytes = read_file(path);
    const std::string damaged = dir.path("damaged.vlat");
    for (std::size_t size = 0; size < bytes.size(); ++size) {
        INFO("cut at " << size);
        write_file(damaged, bytes.substr(0, size));
        CHECK_THROWS_AS(read_vlat(damaged), Error);
    }
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        INFO("byte " << i);
        std::string changed = bytes;
        changed[i] = static_cast<char>(~changed[i]);
        write_file(damaged, changed);
        CHECK_THROWS_AS(read_vlat(damaged), Error);
    }
}

TEST_CASE("write_vlat refuses inconsistent product codes and leaves no file", "[format][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string path = dir.path("out.vlat");
    const VlatFile good = product_sample(rng, 40, 6, 4, 5, 4, 3);
    const auto refuses = [&](const VlatFile& file, const std::string& message) {
        INFO(message);
        CHECK_THROWS_WITH(write_vlat(path, file), StartsWith(path) && Contains(message));
        CHECK_FALSE(std::filesystem::exists(path));
    };

    VlatFile bad = good;
    bad.product = ProductCodes{};
    refuses(bad, "the residual codec is product, but product codes are missing");
    bad = good;
    bad.codec = ResidualCodec::none;
    refuses(bad, "the residual codec is none, but product codes are given");
    bad = good;
    bad.codec = static_cast<ResidualCodec>(3);
    refuses(bad, "metric, anchor storage or residual codec has a value the format does not define");
    bad = good;
    bad.product.codes.pop_back();
    refuses(bad, "section CODE: 79 code bytes are not n = 40 codes of 2 bytes (M = 3 codes of 4 bits)");
    bad = good;
    bad.product.codes[2 * 11 + 1] |= 0x80;
    refuses(bad, "section CODE: vector 11 ends in byte");
    bad = good;
    bad.product.book.bits = 6;
    refuses(bad, "section CDBK: codes of 6 bits");
    bad = good;
    bad.product.book.bounds[1] = 0;
    refuses(bad, "section CDBK: sub-space bound 1 is 0, not above bound 0 (0)");
    bad = good;
    bad.product.book.rotation.row(2)[3] += 0.1f;
    refuses(bad, "section ROTN: row");
    bad = good;
    bad.product.book.centroids = Matrix(8, 5);
    refuses(bad, "section CDBK: the centroids are 8 x 5 (40 values), not 2^b x p = 16 x 5");
    bad = good;
    bad.product.book.centroids.row(3)[4] = std::numeric_limits<float>::infinity();
    refuses(bad, "section CDBK: row 3, column 4 is inf");

    write_vlat(path, good);
    CHECK(read_vlat(path).product.codes == good.product.codes);
}

TEST_CASE("check_product_codebook: shapes, the orthonormality tolerance and the decode bound", "[product]") {
    ProductCodebook book;
    book.bits = 4;
    book.bounds = {0, 1, 2};
    book.rotation = Matrix(2, 3);
    book.rotation.row(0)[0] = 1.0f;
    book.rotation.row(1)[2] = 1.0f;
    book.centroids = Matrix(16, 2);
    book.centroids.row(15)[1] = 1e30f;
    CHECK_NOTHROW(check_product_codebook(book, 3, 1.0));
    CHECK(describe_product(book) == "M = 2 x 4 bits over 2 rotated dimensions");

    SECTION("shapes") {
        CHECK_THROWS_WITH(check_product_codebook(book, 2, 1.0),
                          Contains("section ROTN: the rotation is 2 x 3 (6 values), not p x d = 2 x 2"));
        CHECK_THROWS_WITH(check_product_codebook(book, 1, 1.0),
                          Contains("section ROTN: p = 2 rotated coordinates, more than the dimension d = 1"));
        ProductCodebook none = book;
        none.bounds = {0};
        CHECK_THROWS_WITH(check_product_codebook(none, 3, 1.0), Contains("no sub-spaces (M must be at least 1)"));
        ProductCodebook wide = book;
        wide.bits = 8;
        CHECK_THROWS_WITH(check_product_codebook(wide, 3, 1.0),
                          Contains("the centroids are 16 x 2 (32 values), not 2^b x p = 256 x 2"));
        ProductCodebook no_stages = book;
        no_stages.stages = 0;
        CHECK_THROWS_WITH(check_product_codebook(no_stages, 3, 1.0), Contains("no stages (S must be at least 1)"));
        ProductCodebook staged = book;
        staged.stages = 2;
        CHECK_THROWS_WITH(check_product_codebook(staged, 3, 1.0),
                          Contains("the centroids are 16 x 2 (32 values), not S 2^b x p = 32 x 2"));
        staged.centroids = Matrix(32, 2);
        CHECK_NOTHROW(check_product_codebook(staged, 3, 1.0));
        CHECK(describe_product(staged) == "M = 2 x 4 bits in 2 stages over 2 rotated dimensions");
    }
    SECTION("R R^T = I to 1e-4: a squared norm 1 + 0.9e-4 passes, 1 + 1.1e-4 does not") {
        ProductCodebook near = book;
        near.rotation.row(1)[2] = static_cast<float>(std::sqrt(1.0 + 0.9e-4));
        CHECK_NOTHROW(check_product_codebook(near, 3, 1.0));
        near.rotation.row(1)[2] = static_cast<float>(std::sqrt(1.0 + 1.1e-4));
        CHECK_THROWS_WITH(check_product_codebook(near, 3, 1.0),
                          Contains("section ROTN: row 1 has squared norm 1.0001"));
        ProductCodebook skew = book;
        skew.rotation.row(1)[0] = 2e-4f;
        CHECK_THROWS_WITH(check_product_codebook(skew, 3, 1.0),
                          Contains("section ROTN: rows 0 and 1 have dot product 0.000199"));
    }
    SECTION("the anchors count toward the decode bound") {
        CHECK_NOTHROW(check_product_codebook(book, 3, 1e38));
        CHECK_THROWS_WITH(check_product_codebook(book, 3, 1.702e38),
                          Contains("the largest anchor magnitude 1.702e+38"));
        CHECK_THROWS_AS(check_product_codebook(book, 3, std::numeric_limits<double>::quiet_NaN()), Error);
    }
}

TEST_CASE("a model (n = 0) round-trips in every version", "[format][model]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string path = dir.path("model.vlat");
    constexpr std::uint32_t d = 6;
    constexpr std::size_t m = 5;  // more anchors than vectors: allowed without vectors

    VlatFile v1;
    v1.d = d;
    v1.anchors = random_points(m, d, rng);
    v1.metadata_json = R"({"model":true})";

    VlatFile v2 = v1;
    v2.codec = ResidualCodec::scalar;
    v2.residuals.layout = code_layout({8, 4, 2, 0, 4, 8});
    v2.residuals.offset = random_points(m, d, rng);
    v2.residuals.step = Matrix(m, d);
    for (float& step : v2.residuals.step.data) {
        step = 0.25f;
    }

    VlatFile v3 = product_sample(rng, 0, d, m, 4, 8, 2);

    for (const VlatFile* model : {&v1, &v2, &v3}) {
        const std::uint32_t version = format_version(*model);
        INFO("version " << version);
        write_vlat(path, *model);
        const VlatFile back = read_vlat(path);
        CHECK(format_version(back) == version);
        CHECK(back.n == 0);
        CHECK(back.assignments.empty());
        CHECK(back.anchors.data == model->anchors.data);
        CHECK(back.sections[1].tag == "ASGN");
        CHECK(back.sections[1].length == 0);
        CHECK(back.residuals.offset.data == model->residuals.offset.data);
        CHECK(back.residuals.step.data == model->residuals.step.data);
        CHECK(back.residuals.layout.bits == model->residuals.layout.bits);
        CHECK(back.product.book.rotation.data == model->product.book.rotation.data);
        CHECK(back.product.book.centroids.data == model->product.book.centroids.data);
        CHECK(back.product.book.bounds == model->product.book.bounds);
        CHECK(reconstruct(back).rows == 0);
        CHECK_THROWS_WITH(code_bytes_per_vector(back), Contains("a model (n = 0) has no vectors"));
        const std::string bytes = read_file(path);
        CHECK(value_at<std::uint64_t>(bytes, kNOffset) == 0);
        CHECK(value_at<std::uint32_t>(bytes, kMOffset) == m);
    }
    write_vlat(path, v2);
    CHECK(read_vlat(path).sections[2].length == d + 8 * m * d);
    write_vlat(path, v3);
    CHECK(read_vlat(path).sections[4].tag == "CODE");
    CHECK(read_vlat(path).sections[4].length == 0);

    // With vectors, m <= n still holds.
    VlatFile few = v1;
    few.n = 3;
    few.assignments = {0, 1, 2};
    CHECK_THROWS_WITH(write_vlat(path, few), Contains("3 vectors cannot have 5 anchors"));
}

// A whole-file budget sizes a file before its codes exist; the size it predicts must be what the
// writer writes, for every version, with and without vectors.
TEST_CASE("vlat_file_bytes is the size write_vlat writes, in every version", "[format][product]") {
    const std::uint64_t s = seed();
    INFO("seed " << s);
    std::mt19937_64 rng(s);
    ScratchDir dir;
    const std::string path = dir.path("sized.vlat");
    constexpr std::uint32_t d = 11;
    constexpr std::uint64_t n = 37;
    constexpr std::size_t m = 6;

    VlatFile plain = product_sample(rng, n, d, m, 5, 8, 2);
    plain.codec = ResidualCodec::none;
    plain.product = {};
    plain.anchor_storage = AnchorStorage::f16;
    VlatFile scalar = plain;
    scalar.anchor_storage = AnchorStorage::f32;
    add_residual_codes(scalar, random_points(n, d, rng), {8, 4, 2, 0, 4, 8, 2, 2, 0, 8, 4});
    VlatFile empty_metadata = plain;
    empty_metadata.metadata_json.clear();
    const std::vector<VlatFile> files = {
        plain,
        empty_metadata,
        scalar,
        product_sample(rng, n, d, m, 7, 4, 3),     // p < d, an odd number of 4-bit codes
        product_sample(rng, n, d, m, d, 8, 5),     // p = d
        product_sample(rng, n, d, m, 6, 8, 3, 4),  // version 4
        product_sample(rng, 0, d, m, 4, 8, 2, 2),  // a model
    };
    for (const VlatFile& file : files) {
        INFO("version " << format_version(file) << ", n " << file.n);
        write_vlat(path, file);
        CHECK(vlat_file_bytes(vlat_shape(file)) == std::filesystem::file_size(path));
    }
}
