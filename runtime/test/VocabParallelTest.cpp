//===- VocabParallelTest.cpp - Kernels of a vocabulary-parallel split -----===//
//
// The embedding lookup and gradient on a block of the table's rows, and the
// label kernels of a class-split cross-entropy and of a loss that ignores
// positions: each against a plain loop, then the property a split relies
// on — the blocks' results summed (the forward all-reduces) or
// concatenated (the gradients) are the whole-table results exactly.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

using namespace tt;

namespace {

using Vec = std::vector<double>;
using Bytes = std::vector<uint8_t>;
using VocabParallelTest = RuntimeTest;

const int32_t kFloatTypes[] = {TESSEL_F32, TESSEL_F64, TESSEL_BF16, TESSEL_F16};
const int32_t kIndexTypes[] = {TESSEL_I32, TESSEL_I64};

/// A block [offset, offset + size) of an extent.
struct Block {
  int64_t offset, size;
};

/// `total` split into g equal blocks (g divides total).
std::vector<Block> evenSplit(int64_t total, int64_t g) {
  std::vector<Block> blocks;
  for (int64_t b = 0; b < g; ++b)
    blocks.push_back({b * (total / g), total / g});
  return blocks;
}

/// The splits every block property is checked on: 2 and 4 equal blocks, and
/// an uneven one with an empty block.
std::vector<std::vector<Block>> splits(int64_t total) {
  return {evenSplit(total, 2),
          evenSplit(total, 4),
          {{0, 5}, {5, 0}, {5, total - 5}}};
}

std::string blockName(const Block &b) {
  return "[" + std::to_string(b.offset) + ", +" + std::to_string(b.size) + ")";
}

/// Runs `body(dtype, indexType, block)` for every float type, index type
/// and block, tracing the case ("f32 ids i64 block [3, 9)").
template <typename Body>
void forEachCase(const char *indices, const std::vector<Block> &blocks,
                 Body body) {
  for (int32_t dt : kFloatTypes)
    for (int32_t it : kIndexTypes)
      for (const Block &b : blocks) {
        SCOPED_TRACE(std::string(dtypeName(dt)) + " " + indices + " " +
                     dtypeName(it) + " block " + blockName(b));
        body(dt, it, b);
      }
}

size_t bytesOf(int32_t dtype, int64_t n) {
  return size_t(n) * size_t(tessel_dtype_size(dtype));
}

/// Garbage output bytes: every output element must be written.
Bytes garbage(int32_t dtype, int64_t n) {
  return Bytes(bytesOf(dtype, n), uint8_t(0x3c));
}

/// Columns [offset, offset + cols) of a row-major [rows, total] matrix.
Vec columns(const Vec &m, int64_t rows, int64_t total, int64_t offset,
            int64_t cols) {
  Vec out;
  for (int64_t r = 0; r < rows; ++r)
    out.insert(out.end(), m.begin() + r * total + offset,
               m.begin() + r * total + offset + cols);
  return out;
}

/// Ids that reach every row of a [vocab] table, most of them repeatedly.
Vec spreadIds(int64_t num, int64_t vocab) {
  Vec ids(static_cast<size_t>(num));
  for (int64_t i = 0; i < num; ++i)
    ids[size_t(i)] = double((i * 7 + 3) % vocab);
  return ids;
}

void expectError(tessel_ctx *ctx, const std::string &part) {
  const char *err = tessel_error(ctx);
  ASSERT_NE(err, nullptr) << "no error; want one containing '" << part << "'";
  EXPECT_NE(std::string(err).find(part), std::string::npos) << err;
  tessel_clear_error(ctx);
}

//===--- Embedding --------------------------------------------------------===//

TEST_F(VocabParallelTest, EmbeddingBlockMatchesPlainLoop) {
  const int64_t vocab = 12, hidden = 5, num = 17;
  const std::vector<Block> blocks = {
      {0, vocab}, {0, 4}, {3, 6}, {8, 4}, {7, 0}};
  forEachCase("ids", blocks, [&](int32_t dt, int32_t it, const Block &b) {
    Bytes table =
        encode(dt, randomValues(dt, size_t(vocab * hidden), -2, 2, 11));
    Vec ids = spreadIds(num, vocab);
    Bytes ib = encode(it, ids), out = garbage(dt, num * hidden);
    tessel_embedding(ctx, dt, it, table.data() + bytesOf(dt, b.offset * hidden),
                     ib.data(), out.data(), num, b.size, hidden, b.offset,
                     vocab);
    ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
    // The table's own row bytes in the block, zero bytes elsewhere.
    Bytes ref(bytesOf(dt, num * hidden), 0);
    size_t rowBytes = bytesOf(dt, hidden);
    for (int64_t i = 0; i < num; ++i) {
      int64_t id = int64_t(ids[size_t(i)]);
      if (id >= b.offset && id < b.offset + b.size)
        std::memcpy(ref.data() + size_t(i) * rowBytes,
                    table.data() + size_t(id) * rowBytes, rowBytes);
    }
    EXPECT_EQ(out, ref);
  });
}

TEST_F(VocabParallelTest, EmbeddingBlocksSumToWholeLookup) {
  const int64_t vocab = 12, hidden = 6, num = 23;
  for (int32_t dt : kFloatTypes) {
    Bytes table =
        encode(dt, randomValues(dt, size_t(vocab * hidden), -3, 3, 12));
    Bytes ib = encode(TESSEL_I64, spreadIds(num, vocab));
    Bytes whole = garbage(dt, num * hidden);
    tessel_embedding(ctx, dt, TESSEL_I64, table.data(), ib.data(), whole.data(),
                     num, vocab, hidden, 0, vocab);
    Vec want = decode(dt, whole);
    for (const auto &split : splits(vocab)) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + " " +
                   std::to_string(split.size()) + " blocks");
      Vec sum(size_t(num * hidden), 0.0);
      for (const Block &b : split) {
        Bytes out = garbage(dt, num * hidden);
        tessel_embedding(
            ctx, dt, TESSEL_I64, table.data() + bytesOf(dt, b.offset * hidden),
            ib.data(), out.data(), num, b.size, hidden, b.offset, vocab);
        Vec part = decode(dt, out);
        for (size_t j = 0; j < sum.size(); ++j)
          sum[j] += part[j];
      }
      expectClose(sum, want, 0.0, 0.0);
    }
  }
}

/// dtable of the block by a plain loop: each row's contributions summed in
/// position order in f64, rounded once.
Vec refEmbeddingGrad(int32_t dt, const Vec &ids, const Vec &dout,
                     int64_t hidden, const Block &b) {
  Vec acc(size_t(b.size * hidden), 0.0);
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t row = int64_t(ids[i]) - b.offset;
    if (row < 0 || row >= b.size)
      continue;
    for (int64_t j = 0; j < hidden; ++j)
      acc[size_t(row * hidden + j)] += dout[i * size_t(hidden) + size_t(j)];
  }
  for (double &v : acc)
    v = quantize(dt, v);
  return acc;
}

TEST_F(VocabParallelTest, EmbeddingGradBlockMatchesPlainLoop) {
  const int64_t vocab = 12, hidden = 5, num = 29;
  const std::vector<Block> blocks = {
      {0, vocab}, {0, 4}, {3, 6}, {8, 4}, {7, 0}};
  forEachCase("ids", blocks, [&](int32_t dt, int32_t it, const Block &b) {
    Vec ids = spreadIds(num, vocab);
    // Magnitudes far apart, so the summation order shows in the bits.
    Vec dout = randomValues(dt, size_t(num * hidden), -1, 1, 13);
    for (size_t j = 0; j < dout.size(); j += 3)
      dout[j] = quantize(dt, dout[j] * 1000);
    Bytes ib = encode(it, ids), db = encode(dt, dout),
          out = garbage(dt, b.size * hidden);
    tessel_embedding_grad(ctx, dt, it, ib.data(), db.data(), out.data(), num,
                          b.size, hidden, b.offset, vocab);
    ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
    expectClose(decode(dt, out), refEmbeddingGrad(dt, ids, dout, hidden, b),
                0.0, 0.0);
  });
}

TEST_F(VocabParallelTest, EmbeddingGradBlocksConcatenateToWholeGrad) {
  const int64_t vocab = 12, hidden = 7, num = 41;
  for (int32_t dt : kFloatTypes) {
    Bytes ib = encode(TESSEL_I32, spreadIds(num, vocab));
    Vec dout = randomValues(dt, size_t(num * hidden), -1, 1, 14);
    for (size_t j = 0; j < dout.size(); j += 5)
      dout[j] = quantize(dt, dout[j] * 4096);
    Bytes db = encode(dt, dout), whole = garbage(dt, vocab * hidden);
    tessel_embedding_grad(ctx, dt, TESSEL_I32, ib.data(), db.data(),
                          whole.data(), num, vocab, hidden, 0, vocab);
    for (const auto &split : splits(vocab)) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + " " +
                   std::to_string(split.size()) + " blocks");
      Bytes cat;
      for (const Block &b : split) {
        Bytes out = garbage(dt, b.size * hidden);
        tessel_embedding_grad(ctx, dt, TESSEL_I32, ib.data(), db.data(),
                              out.data(), num, b.size, hidden, b.offset, vocab);
        cat.insert(cat.end(), out.begin(), out.end());
      }
      EXPECT_EQ(cat, whole); // Bit for bit.
    }
  }
}

TEST_F(VocabParallelTest, EmbeddingIdsOutsideTheBlockAreNotErrors) {
  // Ids 0 and 4 are in the table but outside the block [1, 3): zero rows and
  // skipped gradient rows, no error.
  float table[2 * 2] = {1, 2, 3, 4}, out[3 * 2], dt[2 * 2];
  int32_t ids[3] = {0, 2, 4};
  float dout[3 * 2] = {10, 20, 30, 40, 50, 60};
  std::fill(out, out + 6, 9.0f);
  tessel_embedding(ctx, TESSEL_F32, TESSEL_I32, table, ids, out, 3, 2, 2, 1, 5);
  const float wantOut[6] = {0, 0, 3, 4, 0, 0};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(out[i], wantOut[i]) << i;
  std::fill(dt, dt + 4, 9.0f);
  tessel_embedding_grad(ctx, TESSEL_F32, TESSEL_I32, ids, dout, dt, 3, 2, 2, 1,
                        5);
  const float wantGrad[4] = {0, 0, 30, 40};
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(dt[i], wantGrad[i]) << i;
}

TEST_F(VocabParallelTest, EmbeddingBadIdOrBlockSetsError) {
  float table[3 * 2] = {1, 2, 3, 4, 5, 6}, out[2 * 2], dt[3 * 2];
  float dout[2 * 2] = {1, 2, 3, 4};
  // An id outside the whole table is an error even when the block is not the
  // whole table; the other row is still looked up (and its gradient taken).
  for (int64_t bad : {int64_t(5), int64_t(-1)}) {
    int64_t ids[2] = {bad, 3};
    std::fill(out, out + 4, 9.0f);
    tessel_embedding(ctx, TESSEL_F32, TESSEL_I64, table, ids, out, 2, 3, 2, 2,
                     5);
    expectError(ctx, "tessel_embedding: id " + std::to_string(bad));
    const float want[4] = {0, 0, 3, 4};
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], want[i]) << i;
    tessel_embedding_grad(ctx, TESSEL_F32, TESSEL_I64, ids, dout, dt, 2, 3, 2,
                          2, 5);
    expectError(ctx, "tessel_embedding_grad: id " + std::to_string(bad));
    const float wantGrad[6] = {0, 0, 3, 4, 0, 0};
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(dt[i], wantGrad[i]) << i;
  }
  // Blocks outside [0, vocab): nothing is written.
  struct BadBlock {
    int64_t rows, offset, vocab;
  };
  const BadBlock blocks[] = {{-1, 0, 5},       {3, -1, 5}, {3, 3, 5},
                             {1, 5, 5},        {3, 0, 2},  {3, INT64_MAX, 5},
                             {INT64_MAX, 2, 5}};
  int64_t ids[2] = {0, 1};
  for (const BadBlock &b : blocks) {
    SCOPED_TRACE("rows " + std::to_string(b.rows) + " offset " +
                 std::to_string(b.offset) + " vocab " +
                 std::to_string(b.vocab));
    std::fill(out, out + 4, 9.0f);
    tessel_embedding(ctx, TESSEL_F32, TESSEL_I64, table, ids, out, 2, b.rows, 2,
                     b.offset, b.vocab);
    expectError(ctx, "tessel_embedding: block");
    std::fill(dt, dt + 6, 9.0f);
    tessel_embedding_grad(ctx, TESSEL_F32, TESSEL_I64, ids, dout, dt, 2, b.rows,
                          2, b.offset, b.vocab);
    expectError(ctx, "tessel_embedding_grad: block");
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], 9.0f);
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(dt[i], 9.0f);
  }
}

//===--- Label kernels ----------------------------------------------------===//

/// Labels that visit every class and both ends of the range.
Vec spreadLabels(int64_t rows, int64_t total) {
  Vec labels(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    labels[size_t(r)] = double((r * 5 + 2) % total);
  labels[0] = 0;
  labels[size_t(rows - 1)] = double(total - 1);
  return labels;
}

TEST_F(VocabParallelTest, LabelLogitMatchesPlainLoop) {
  const int64_t rows = 15, total = 12;
  const std::vector<Block> blocks = {
      {0, total}, {0, 4}, {3, 6}, {8, 4}, {7, 0}};
  forEachCase("labels", blocks, [&](int32_t dt, int32_t lt, const Block &b) {
    Vec logits = randomValues(dt, size_t(rows * total), -5, 5, 21);
    Vec labels = spreadLabels(rows, total);
    Bytes xb = encode(dt, columns(logits, rows, total, b.offset, b.size));
    Bytes lb = encode(lt, labels), out = garbage(dt, rows);
    tessel_label_logit(ctx, dt, lt, xb.data(), lb.data(), out.data(), rows,
                       b.size, b.offset, total);
    ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
    Vec want(size_t(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t c = int64_t(labels[size_t(r)]);
      if (c >= b.offset && c < b.offset + b.size)
        want[size_t(r)] = logits[size_t(r * total + c)];
    }
    expectClose(decode(dt, out), want, 0.0, 0.0);
  });
}

TEST_F(VocabParallelTest, LabelLogitBlocksSumToLabelLogit) {
  const int64_t rows = 19, total = 12;
  for (int32_t dt : kFloatTypes) {
    Vec logits = randomValues(dt, size_t(rows * total), -8, 8, 22);
    Vec labels = spreadLabels(rows, total);
    Bytes lb = encode(TESSEL_I64, labels);
    Vec want(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      want[size_t(r)] = logits[size_t(r * total + int64_t(labels[size_t(r)]))];
    for (const auto &split : splits(total)) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + " " +
                   std::to_string(split.size()) + " blocks");
      Vec sum(size_t(rows), 0.0);
      for (const Block &b : split) {
        Bytes xb = encode(dt, columns(logits, rows, total, b.offset, b.size));
        Bytes out = garbage(dt, rows);
        tessel_label_logit(ctx, dt, TESSEL_I64, xb.data(), lb.data(),
                           out.data(), rows, b.size, b.offset, total);
        Vec part = decode(dt, out);
        for (size_t r = 0; r < sum.size(); ++r)
          sum[r] += part[r];
      }
      expectClose(sum, want, 0.0, 0.0);
    }
  }
}

/// x − onehot(labels)·values over the whole rows, each subtraction rounded
/// once to the dtype (the kernel's f32 compute type rounds the difference of
/// two 16-bit or f32 values without a double-rounding error).
Vec refSubLabel(int32_t dt, const Vec &x, const Vec &labels, const Vec &values,
                int64_t rows, int64_t total) {
  Vec out = x;
  for (int64_t r = 0; r < rows; ++r) {
    double &y = out[size_t(r * total + int64_t(labels[size_t(r)]))];
    y = quantize(dt, y - values[size_t(r)]);
  }
  return out;
}

TEST_F(VocabParallelTest, SubLabelBlocksConcatenateToWhole) {
  const int64_t rows = 17, total = 12;
  for (int32_t dt : kFloatTypes)
    for (int32_t lt : kIndexTypes) {
      Vec x = randomValues(dt, size_t(rows * total), -1, 1, 31);
      Vec values = randomValues(dt, size_t(rows), -3, 3, 32);
      Vec labels = spreadLabels(rows, total);
      Bytes lb = encode(lt, labels), vb = encode(dt, values);
      Vec want = refSubLabel(dt, x, labels, values, rows, total);
      // The whole rows, against the plain loop.
      Bytes whole = garbage(dt, rows * total), xb = encode(dt, x);
      tessel_sub_label(ctx, dt, lt, xb.data(), lb.data(), vb.data(),
                       whole.data(), rows, total, 0, total);
      ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
      expectClose(decode(dt, whole), want, 0.0, 0.0);
      for (const auto &split : splits(total)) {
        SCOPED_TRACE(std::string(dtypeName(dt)) + " labels " + dtypeName(lt) +
                     " " + std::to_string(split.size()) + " blocks");
        // Each block against the plain loop's columns, then reassembled
        // against the whole call bit for bit.
        Bytes cat(whole.size());
        size_t es = size_t(tessel_dtype_size(dt));
        for (const Block &b : split) {
          Bytes bx = encode(dt, columns(x, rows, total, b.offset, b.size));
          Bytes out = garbage(dt, rows * b.size);
          tessel_sub_label(ctx, dt, lt, bx.data(), lb.data(), vb.data(),
                           out.data(), rows, b.size, b.offset, total);
          expectClose(decode(dt, out),
                      columns(want, rows, total, b.offset, b.size), 0.0, 0.0);
          for (int64_t r = 0; r < rows; ++r)
            std::memcpy(cat.data() + size_t(r * total + b.offset) * es,
                        out.data() + size_t(r * b.size) * es,
                        size_t(b.size) * es);
        }
        EXPECT_EQ(cat, whole);
      }
    }
}

TEST_F(VocabParallelTest, SubLabelInPlace) {
  const int64_t rows = 9, total = 8;
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dt));
    Vec x = randomValues(dt, size_t(rows * total), -1, 1, 41);
    Vec values = randomValues(dt, size_t(rows), -2, 2, 42);
    Vec labels = spreadLabels(rows, total);
    Bytes lb = encode(TESSEL_I32, labels), vb = encode(dt, values);
    Vec want = refSubLabel(dt, x, labels, values, rows, total);
    for (const Block &b : evenSplit(total, 2)) {
      Bytes bx = encode(dt, columns(x, rows, total, b.offset, b.size));
      tessel_sub_label(ctx, dt, TESSEL_I32, bx.data(), lb.data(), vb.data(),
                       bx.data(), rows, b.size, b.offset, total);
      expectClose(decode(dt, bx), columns(want, rows, total, b.offset, b.size),
                  0.0, 0.0);
    }
  }
}

TEST_F(VocabParallelTest, LabelKernelsBadLabelSetsError) {
  // Block [2, 4) of 6 classes; row 1's label is outside [0, 6).
  float x[3 * 2] = {1, 2, 3, 4, 5, 6}, values[3] = {10, 20, 30}, out[6];
  for (int64_t bad : {int64_t(6), int64_t(-1)}) {
    int64_t labels[3] = {3, bad, 2};
    std::fill(out, out + 3, 9.0f);
    tessel_label_logit(ctx, TESSEL_F32, TESSEL_I64, x, labels, out, 3, 2, 2, 6);
    expectError(ctx, "tessel_label_logit: label " + std::to_string(bad));
    EXPECT_EQ(out[0], 2.0f);
    EXPECT_EQ(out[1], 0.0f);
    EXPECT_EQ(out[2], 5.0f);
    std::fill(out, out + 6, 9.0f);
    tessel_sub_label(ctx, TESSEL_F32, TESSEL_I64, x, labels, values, out, 3, 2,
                     2, 6);
    expectError(ctx, "tessel_sub_label: label " + std::to_string(bad));
    const float want[6] = {1, 2 - 10, 3, 4, 5 - 30, 6};
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(out[i], want[i]) << i;
  }
}

TEST_F(VocabParallelTest, LabelKernelsBadBlockOrDtypeSetsError) {
  float x[2 * 2] = {1, 2, 3, 4}, values[2] = {1, 1}, out[4];
  int32_t labels[2] = {0, 1};
  struct BadCall {
    const char *what;
    int32_t dtype, labelDtype;
    int64_t rows, classes, offset, total;
    const char *message;
  };
  const BadCall calls[] = {
      {"negative offset", TESSEL_F32, TESSEL_I32, 2, 2, -1, 4, "block"},
      {"past the end", TESSEL_F32, TESSEL_I32, 2, 2, 3, 4, "block"},
      {"wider than total", TESSEL_F32, TESSEL_I32, 2, 2, 0, 1, "block"},
      {"negative classes", TESSEL_F32, TESSEL_I32, 2, -1, 0, 4, "block"},
      {"overflowing offset", TESSEL_F32, TESSEL_I32, 2, 2, INT64_MAX, 4,
       "block"},
      {"negative rows", TESSEL_F32, TESSEL_I32, -1, 2, 0, 4, "negative shape"},
      {"float labels", TESSEL_F32, TESSEL_F32, 2, 2, 0, 4, "labels must be"},
      {"integer logits", TESSEL_I32, TESSEL_I32, 2, 2, 0, 4,
       "unsupported dtype"},
  };
  for (const BadCall &c : calls) {
    SCOPED_TRACE(c.what);
    std::fill(out, out + 4, 9.0f);
    tessel_label_logit(ctx, c.dtype, c.labelDtype, x, labels, out, c.rows,
                       c.classes, c.offset, c.total);
    expectError(ctx, std::string("tessel_label_logit: ") + c.message);
    tessel_sub_label(ctx, c.dtype, c.labelDtype, x, labels, values, out, c.rows,
                     c.classes, c.offset, c.total);
    expectError(ctx, std::string("tessel_sub_label: ") + c.message);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], 9.0f); // Nothing written.
  }
}

//===--- The labels of a loss that ignores positions ----------------------===//

TEST_F(VocabParallelTest, MaskLabelsMatchesPlainLoop) {
  // -100 (fine-tuning's), a label equal to a class (3) and one beyond i32.
  const Vec labels = {5, -100, 0, 3, -100, -100, 7, 3, 1, -5};
  const int64_t n = int64_t(labels.size());
  for (int64_t ignore : {int64_t(-100), int64_t(3), int64_t(1) << 40})
    for (int32_t dt : kFloatTypes)
      for (int32_t lt : kIndexTypes) {
        SCOPED_TRACE(std::string(dtypeName(dt)) + " labels " + dtypeName(lt) +
                     " ignore " + std::to_string(ignore));
        Bytes lb = encode(lt, labels), safe = garbage(lt, n),
              weights = garbage(dt, n);
        tessel_mask_labels(ctx, lt, dt, lb.data(), ignore, safe.data(),
                           weights.data(), n);
        ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
        Vec wantSafe, wantWeights;
        for (double l : labels) {
          bool ignored = int64_t(l) == ignore;
          wantSafe.push_back(ignored ? 0 : l);
          wantWeights.push_back(ignored ? 0 : 1);
        }
        EXPECT_EQ(decode(lt, safe), wantSafe);
        EXPECT_EQ(decode(dt, weights), wantWeights);
        // In place: the safe labels over the labels.
        tessel_mask_labels(ctx, lt, dt, lb.data(), ignore, lb.data(),
                           weights.data(), n);
        ASSERT_EQ(tessel_error(ctx), nullptr) << tessel_error(ctx);
        EXPECT_EQ(decode(lt, lb), wantSafe);
      }
}

TEST_F(VocabParallelTest, MaskLabelsBadArgumentsSetError) {
  int32_t labels[4] = {1, -100, 2, 3}, safe[4];
  float weights[4];
  struct BadCall {
    const char *what;
    int32_t labelDtype, dtype;
    const void *labels;
    void *safe, *weights;
    int64_t n;
    const char *message;
  };
  const BadCall calls[] = {
      {"float labels", TESSEL_F32, TESSEL_F32, labels, safe, weights, 4,
       "labels must be"},
      {"integer weights", TESSEL_I32, TESSEL_I32, labels, safe, weights, 4,
       "unsupported dtype"},
      {"negative count", TESSEL_I32, TESSEL_F32, labels, safe, weights, -1,
       "bad label count"},
      {"overflowing count", TESSEL_I32, TESSEL_F32, labels, safe, weights,
       INT64_MAX / 2, "bad label count"},
      {"safe inside the labels", TESSEL_I32, TESSEL_F32, labels, labels + 1,
       weights, 3, "outputs overlap"},
      {"weights over the labels", TESSEL_I32, TESSEL_F32, labels, safe, labels,
       4, "outputs overlap"},
  };
  for (const BadCall &c : calls) {
    SCOPED_TRACE(c.what);
    std::fill(weights, weights + 4, 9.0f);
    tessel_mask_labels(ctx, c.labelDtype, c.dtype, c.labels, -100, c.safe,
                       c.weights, c.n);
    expectError(ctx, std::string("tessel_mask_labels: ") + c.message);
    for (float w : weights)
      EXPECT_EQ(w, 9.0f); // Nothing written.
  }
}

TEST_F(VocabParallelTest, EveryKernelCounts) {
  float x[4] = {1, 2, 3, 4}, v[2] = {1, 1}, out[4];
  int32_t ids[2] = {0, 1};
  tessel_reset_counters(ctx);
  tessel_embedding(ctx, TESSEL_F32, TESSEL_I32, x, ids, out, 2, 1, 2, 1, 2);
  tessel_embedding_grad(ctx, TESSEL_F32, TESSEL_I32, ids, x, out, 2, 1, 2, 1,
                        2);
  tessel_label_logit(ctx, TESSEL_F32, TESSEL_I32, x, ids, out, 2, 2, 0, 2);
  tessel_sub_label(ctx, TESSEL_F32, TESSEL_I32, x, ids, v, out, 2, 2, 0, 2);
  int32_t safe[2];
  tessel_mask_labels(ctx, TESSEL_I32, TESSEL_F32, ids, -100, safe, out, 2);
  tessel_counters c;
  tessel_get_counters(ctx, &c);
  EXPECT_EQ(c.kernel_calls, 5);
}

} // namespace
