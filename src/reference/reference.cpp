#include "reference/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace blockattn::reference {
namespace {

size_t index(const Problem& p, int64_t token, int head, int heads) {
  return (static_cast<size_t>(token) * heads + head) * p.head_dim;
}

double dot(const double* a, const double* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i)
    s += a[i] * b[i];
  return s;
}

// Row-wise softmax of scale * q_i . k_j over the block's keys, in place on probs [n x n].
void block_probs(const Problem& p, const schedule::BlockDesc& b, int qh, int kh, const std::vector<double>& q,
                 const std::vector<double>& k, std::vector<double>& probs) {
  const int n = b.row_count;
  probs.assign(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    double* row = &probs[static_cast<size_t>(i) * n];
    double mx = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < n; ++j) {
      row[j] = p.softmax_scale() * dot(&q[index(p, b.row_begin + i, qh, p.num_q_heads)],
                                       &k[index(p, b.row_begin + j, kh, p.num_kv_heads)], p.head_dim);
      mx = std::max(mx, row[j]);
    }
    double sum = 0;
    for (int j = 0; j < n; ++j)
      sum += (row[j] = std::exp(row[j] - mx));
    for (int j = 0; j < n; ++j)
      row[j] /= sum;
  }
}

}  // namespace

double Problem::softmax_scale() const { return scale != 0.0 ? scale : 1.0 / std::sqrt(double(head_dim)); }

std::vector<schedule::BlockDesc> block_schedule(const std::vector<int32_t>& offsets, int32_t total_tokens,
                                                int32_t block_size, std::vector<schedule::BlockSeq>* seqs) {
  std::vector<schedule::BlockDesc> blocks;
  if (seqs != nullptr) seqs->clear();
  if (offsets.size() < 2) return blocks;
  int32_t begin = schedule::clamp_offset(offsets[0], total_tokens);
  for (size_t b = 0; b + 1 < offsets.size(); ++b) {
    const int32_t end = std::max(begin, schedule::clamp_offset(offsets[b + 1], total_tokens));
    for (int32_t row = begin; row < end; row += block_size) {
      blocks.push_back({row, std::min(block_size, end - row)});
      if (seqs != nullptr) seqs->push_back({static_cast<int32_t>(b), row - begin});
    }
    begin = end;
  }
  return blocks;
}

std::vector<schedule::BlockDesc> tile_schedule(const std::vector<int32_t>& offsets, int32_t total_tokens,
                                               int32_t block_size, std::vector<schedule::BlockSeq>* seqs) {
  // The blocks, then each run of short sequences (a sequence's only block,
  // shorter than block_size) folded greedily into its first entry; the
  // entries it took are left empty. An empty sequence (no entry) ends a run.
  std::vector<schedule::BlockSeq> block_seqs;
  std::vector<schedule::BlockDesc> tiles = block_schedule(offsets, total_tokens, block_size, &block_seqs);
  auto is_short = [&](size_t i) {
    return block_seqs[i].first_pos == 0 && schedule::is_packable(tiles[i].row_count, block_size);
  };
  for (size_t i = 0; i < tiles.size();) {
    if (!is_short(i)) {
      ++i;
      continue;
    }
    const int32_t group = block_seqs[i].seq / schedule::kPackGroup;
    int32_t rows = tiles[i].row_count;
    size_t j = i + 1;
    for (; j < tiles.size() && is_short(j) && block_seqs[j].seq == block_seqs[j - 1].seq + 1 &&
           block_seqs[j].seq / schedule::kPackGroup == group && rows + tiles[j].row_count <= block_size;
         ++j) {
      tiles[i].segment_starts |= uint64_t{1} << rows;
      rows += tiles[j].row_count;
      tiles[j].row_count = 0;
    }
    tiles[i].row_count = rows;
    i = j;
  }
  if (seqs != nullptr) *seqs = std::move(block_seqs);
  return tiles;
}

std::vector<schedule::BlockDesc> split_block_schedule(const std::vector<int32_t>& offsets, int32_t total_tokens,
                                                      int32_t block_size, std::vector<schedule::BlockSeq>* seqs) {
  std::vector<schedule::BlockSeq> all_seqs;
  const auto all = block_schedule(offsets, total_tokens, block_size, &all_seqs);
  std::vector<schedule::BlockDesc> blocks;
  if (seqs != nullptr) seqs->clear();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].row_count <= schedule::kShortBlockRows) continue;  // the short tables'
    blocks.push_back(all[i]);
    if (seqs != nullptr) seqs->push_back(all_seqs[i]);
  }
  return blocks;
}

std::vector<schedule::BlockDesc> short_block_schedule(const std::vector<int32_t>& offsets, int32_t total_tokens,
                                                      int32_t block_size, bool packed,
                                                      std::vector<schedule::BlockSeq>* seqs) {
  std::vector<schedule::BlockDesc> entries;
  std::vector<schedule::BlockSeq> entry_seqs;
  std::vector<int32_t> lengths;
  if (offsets.size() >= 2) {
    int32_t begin = schedule::clamp_offset(offsets[0], total_tokens);
    for (size_t b = 0; b + 1 < offsets.size(); ++b) {
      const int32_t end = std::max(begin, schedule::clamp_offset(offsets[b + 1], total_tokens));
      const int32_t length = end - begin, rows = schedule::short_tail_rows(length, block_size);
      entries.push_back({end - rows, rows});
      entry_seqs.push_back({static_cast<int32_t>(b), length - rows});
      lengths.push_back(length);
      begin = end;
    }
  }
  // Packed: a whole sequence shorter than kShortBlockRows takes its entry of
  // the tiles table at that block size (a packed tile, or empty where an
  // earlier sequence's tile took it).
  if (packed) {
    std::vector<schedule::BlockSeq> tile_seqs;
    const auto tiles = tile_schedule(offsets, total_tokens, schedule::kShortBlockRows, &tile_seqs);
    for (size_t i = 0; i < tiles.size(); ++i) {
      const int32_t s = tile_seqs[i].seq;
      if (tile_seqs[i].first_pos == 0 && schedule::is_packable(lengths[s], schedule::kShortBlockRows))
        entries[s] = tiles[i];
    }
  }
  // Only the sequences that have a short block keep their entry.
  std::vector<schedule::BlockDesc> kept;
  if (seqs != nullptr) seqs->clear();
  for (size_t s = 0; s < entries.size(); ++s) {
    if (schedule::short_entries(lengths[s], block_size, /*split=*/true) == 0) continue;
    kept.push_back(entries[s]);
    if (seqs != nullptr) seqs->push_back(entry_seqs[s]);
  }
  return kept;
}

std::vector<int64_t> token_positions(const Problem& p, const RotaryTables& r) {
  std::vector<int64_t> pos(static_cast<size_t>(p.total_tokens), -1);
  std::vector<schedule::BlockSeq> seqs;
  const auto blocks = block_schedule(p.offsets, static_cast<int32_t>(p.total_tokens), p.block_size, &seqs);
  for (size_t i = 0; i < blocks.size(); ++i)
    for (int32_t row = 0; row < blocks[i].row_count; ++row) {
      const int64_t start = r.seq_start.empty() ? 0 : r.seq_start[static_cast<size_t>(seqs[i].seq)];
      pos[static_cast<size_t>(blocks[i].row_begin + row)] =
          r.in_sequence ? start + seqs[i].first_pos + row : blocks[i].row_begin + row;
    }
  return pos;
}

void rotate(const Problem& p, const RotaryTables& r, int heads, bool transpose, std::vector<double>& x) {
  const int half = r.rotary_dim / 2;
  const std::vector<int64_t> pos = token_positions(p, r);
  for (int64_t t = 0; t < p.total_tokens; ++t) {
    const int64_t at = pos[static_cast<size_t>(t)];
    if (at < 0 || at >= r.num_positions) continue;  // identity
    for (int h = 0; h < heads; ++h) {
      double* v = &x[index(p, t, h, heads)];
      for (int j = 0; j < half; ++j) {
        const int a = r.half_split ? j : 2 * j, b = r.half_split ? j + half : 2 * j + 1;
        const double c = r.cos[static_cast<size_t>(at * half + j)];
        const double s = (transpose ? -1.0 : 1.0) * r.sin[static_cast<size_t>(at * half + j)];
        const double xa = v[a], xb = v[b];
        v[a] = xa * c - xb * s;
        v[b] = xb * c + xa * s;
      }
    }
  }
}

void forward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
             std::vector<double>& out) {
  const int group = p.num_q_heads / p.num_kv_heads;
  std::vector<double> probs;
  for (const auto& b : block_schedule(p.offsets, static_cast<int32_t>(p.total_tokens), p.block_size)) {
    for (int qh = 0; qh < p.num_q_heads; ++qh) {
      const int kh = qh / group;
      block_probs(p, b, qh, kh, q, k, probs);
      for (int i = 0; i < b.row_count; ++i) {
        double* o = &out[index(p, b.row_begin + i, qh, p.num_q_heads)];
        std::fill(o, o + p.head_dim, 0.0);
        for (int j = 0; j < b.row_count; ++j) {
          const double pij = probs[static_cast<size_t>(i) * b.row_count + j];
          const double* vj = &v[index(p, b.row_begin + j, kh, p.num_kv_heads)];
          for (int d = 0; d < p.head_dim; ++d)
            o[d] += pij * vj[d];
        }
      }
    }
  }
}

void backward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
              const std::vector<double>& v, const std::vector<double>& dout, std::vector<double>& dq,
              std::vector<double>& dk, std::vector<double>& dv) {
  const int group = p.num_q_heads / p.num_kv_heads;
  const int D = p.head_dim;
  const double scale = p.softmax_scale();
  std::vector<double> probs, dscores;
  for (const auto& b : block_schedule(p.offsets, static_cast<int32_t>(p.total_tokens), p.block_size)) {
    const int n = b.row_count;
    for (int kh = 0; kh < p.num_kv_heads; ++kh)
      for (int j = 0; j < n; ++j) {
        std::fill_n(&dk[index(p, b.row_begin + j, kh, p.num_kv_heads)], D, 0.0);
        std::fill_n(&dv[index(p, b.row_begin + j, kh, p.num_kv_heads)], D, 0.0);
      }
    for (int qh = 0; qh < p.num_q_heads; ++qh) {
      const int kh = qh / group;
      block_probs(p, b, qh, kh, q, k, probs);
      dscores.assign(static_cast<size_t>(n) * n, 0.0);
      for (int i = 0; i < n; ++i) {
        const double* doi = &dout[index(p, b.row_begin + i, qh, p.num_q_heads)];
        double row_dot = 0;  // sum_j P_ij dP_ij
        for (int j = 0; j < n; ++j) {
          const double dpij = dot(doi, &v[index(p, b.row_begin + j, kh, p.num_kv_heads)], D);
          dscores[static_cast<size_t>(i) * n + j] = dpij;
          row_dot += probs[static_cast<size_t>(i) * n + j] * dpij;
        }
        for (int j = 0; j < n; ++j) {
          double& ds = dscores[static_cast<size_t>(i) * n + j];
          ds = probs[static_cast<size_t>(i) * n + j] * (ds - row_dot);
        }
      }
      for (int i = 0; i < n; ++i) {
        double* dqi = &dq[index(p, b.row_begin + i, qh, p.num_q_heads)];
        std::fill(dqi, dqi + D, 0.0);
        const double* qi = &q[index(p, b.row_begin + i, qh, p.num_q_heads)];
        const double* doi = &dout[index(p, b.row_begin + i, qh, p.num_q_heads)];
        for (int j = 0; j < n; ++j) {
          const double ds = dscores[static_cast<size_t>(i) * n + j] * scale;
          const double pij = probs[static_cast<size_t>(i) * n + j];
          const double* kj = &k[index(p, b.row_begin + j, kh, p.num_kv_heads)];
          double* dkj = &dk[index(p, b.row_begin + j, kh, p.num_kv_heads)];
          double* dvj = &dv[index(p, b.row_begin + j, kh, p.num_kv_heads)];
          for (int d = 0; d < D; ++d) {
            dqi[d] += ds * kj[d];
            dkj[d] += ds * qi[d];
            dvj[d] += pij * doi[d];
          }
        }
      }
    }
  }
}

void dense_masked_forward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                          const std::vector<double>& v, std::vector<double>& out) {
  // block id of every token: (sequence, position / block_size); -1 outside all sequences.
  const int64_t T = p.total_tokens;
  std::vector<int64_t> block_id(static_cast<size_t>(T), -1);
  int64_t next_id = 0;
  for (size_t b = 0; b + 1 < p.offsets.size(); ++b) {
    for (int64_t t = p.offsets[b]; t < p.offsets[b + 1]; ++t)
      block_id[static_cast<size_t>(t)] = next_id + (t - p.offsets[b]) / p.block_size;
    next_id += (p.offsets[b + 1] - p.offsets[b] + p.block_size - 1) / p.block_size;
  }
  const int group = p.num_q_heads / p.num_kv_heads;
  std::vector<double> w(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) {
    if (block_id[i] < 0) continue;
    for (int qh = 0; qh < p.num_q_heads; ++qh) {
      const int kh = qh / group;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < T; ++j) {
        w[j] = block_id[j] == block_id[i] ? p.softmax_scale() * dot(&q[index(p, i, qh, p.num_q_heads)],
                                                                    &k[index(p, j, kh, p.num_kv_heads)], p.head_dim)
                                          : -std::numeric_limits<double>::infinity();
        mx = std::max(mx, w[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < T; ++j)
        sum += (w[j] = std::exp(w[j] - mx));
      double* o = &out[index(p, i, qh, p.num_q_heads)];
      std::fill(o, o + p.head_dim, 0.0);
      for (int64_t j = 0; j < T; ++j) {
        if (w[j] == 0.0) continue;
        const double* vj = &v[index(p, j, kh, p.num_kv_heads)];
        for (int d = 0; d < p.head_dim; ++d)
          o[d] += w[j] / sum * vj[d];
      }
    }
  }
}

}  // namespace blockattn::reference
