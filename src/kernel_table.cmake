# The kernel table: every kernel this library can contain, one row per
# (backend, operation, head dim, block size), each built for the listed dtypes
# and fused transforms.
# The build generates from it one compile unit per kernel, the table that the
# backends dispatch on, and supported_configs(); nothing else lists kernels.
#
#   backend    sm80 (kPortable: mma.sync, sm_80+) or sm90 (kHopper: TMA + wgmma, sm_90a)
#   fusions    none:   the plain kernel
#              rotary: rotary embeddings fused into the loads and gradient
#                      stores (tile/rotary.cuh); one more kernel per dtype
#   automatic  auto:   Backend::kAuto may choose this kernel
#              short:  kAuto chooses it for batches of sequences shorter than a
#                      block on average (core/batch_kind.h), where it measured
#                      faster; for other batches it is manual
#              short-or-fast-memory: as short, and for every batch on a
#                      device whose memory peak is at least
#                      core::kFastMemoryGBps (an H200, not an H100), where it
#                      measured faster
#              except-long-mha-on-slow-memory: as short-or-fast-memory, and
#                      for batches of a few blocks per sequence and
#                      grouped-query backwards (num_q_heads !=
#                      num_kv_heads), which the row's grouped kernel serves
#              16-bit-tables: where the rotary tables hold bf16 or fp16
#                      values (Rotary::table_type), which the kernel stages
#                      by TMA; manual with fp32 tables
#              manual: only when asked for by name (another backend measured
#                      faster on the same problem; docs/perf.md), and built
#                      only with -DBLOCKATTN_MANUAL_KERNELS=ON
#
# Adding a head dim or a block size: a row here, plus whatever the kernels
# genuinely lack for it (docs/architecture.md, "Adding a kernel").
#
#  backend  operation  head_dim  block_size  dtypes     fusions      automatic
set(BLOCKATTN_KERNEL_TABLE
  # Grouped-query heads run its grouped kernel (sm90/grouped_forward.cuh, K
  # and V once per KV head): mqa-d64-h8x1 88.1-88.5% of copy against the
  # per-tile kernel's 77.3-77.6% (H200, sustained, 2026-11-30).
  "sm90     forward    64        64          bf16,fp16  none,rotary  auto"
  "sm90     forward    128       64          bf16,fp16  none,rotary  auto"
  "sm90     forward    32        64          bf16,fp16  none         auto"    # 99.6-100% of copy (three consumers) vs sm80's 71.4%
  "sm90     forward    32        64          bf16,fp16  rotary       manual"  # sm80 faster with rotary: 3.31 vs 3.41 ms (2026-11-25)
  "sm90     forward    96        64          bf16,fp16  none,rotary  manual"  # sm80 faster: 98.2% vs 74.5-74.7% (H100; sm80 with claimed tiles, 2026-11-27)
  "sm90     forward    160       64          bf16,fp16  none,rotary  manual"  # sm80 faster: 100.8% vs 75.9-76.8% (H100)
  "sm90     forward    192       64          bf16,fp16  none,rotary  manual"  # sm80 faster: 102.8% vs 84.8% (2 stages)
  "sm90     forward    224       64          bf16,fp16  none,rotary  manual"  # sm80 faster: 99.5% vs 80.3-80.6% (H100)
  "sm90     forward    256       64          bf16,fp16  none,rotary  manual"  # sm80 faster: 100.8-103.0% vs 98.4-99.0% (H100, session 41)
  # kAuto takes it for short sequences (H100, % of copy: tail-d64 79.1-80.5%
  # against sm80's 70.0-70.9%), and for every batch on faster memory: on the
  # H100 headline-d64 reads 83.3-84.2% against sm80's 85.9-86.0%, on an H200
  # 85.9-86.6% against 72.6-72.7% (docs/perf.md, "kAuto by memory peak").
  # Grouped-query heads run its grouped kernel (sm90/grouped_backward.cuh):
  # mqa-d64-h8x1 87.5-95.4% against sm80's 73.2-77.0% (H100); so do
  # batches of a few blocks per sequence (BatchKind::kFewBlocks, slower
  # memory only), a group of one: sweep-d64-L256-f0.5 86.0-87.4% against
  # sm80's 81.1-81.5% (H100); and batches of many (kManyBlocks, 8 or more),
  # a group of one on walks of its own, heads in pairs: headline-d64
  # 91.8-92.5% against sm80's 87.3-88.0% (H100), and 89.3-89.4% against
  # this row's per-tile kernel's 84.7-86.8% (H200, 2026-11-27).
  "sm90     backward   64        64          bf16,fp16  none         except-long-mha-on-slow-memory"
  "sm90     backward   64        64          bf16,fp16  rotary       auto"    # 6.16 vs sm80's 7.77 ms (docs/perf.md, "Build time")
  "sm90     backward   128       64          bf16,fp16  none,rotary  auto"    # rotary: 6.95 vs sm80's 7.73 ms
  "sm90     backward   32        64          bf16,fp16  none         auto"    # 93% of copy (exact 32-column boxes) vs sm80's 64.7%
  "sm90     backward   32        64          bf16,fp16  rotary       manual"  # sm80 faster with rotary: 8.88 vs 15.36 ms
  "sm90     backward   96        64          bf16,fp16  none,rotary  manual"  # sm80 faster: 85.0-85.4% vs 71.6-73.3% (25% more tiles than D = 128 per byte)
  # At D = 160 and 192 a CTA takes its two consumers' tiles from neighbouring
  # heads (frame.cuh's cta_tile): +5.5 and +4 points (2026-11-27).
  "sm90     backward   160       64          bf16,fp16  none,rotary  auto"    # 84.4-84.9% of copy (exact 32-column boxes) vs sm80's 77.8-78.3%
  "sm90     backward   192       64          bf16,fp16  none,rotary  auto"    # 89.8-90.2% of copy vs sm80's 76.8-77.3% (two 96 KB stages)
  # Both consumers share a tile, by output columns (sm90/column_split_backward.cuh),
  # two neighbouring heads' tiles in a row: D = 224 +6 points (2026-11-27).
  "sm90     backward   224       64          bf16,fp16  none,rotary  auto"    # 86.6-87.1% of copy (exact boxes, TMA stores)
  "sm90     backward   256       64          bf16,fp16  none,rotary  auto"    # 92.0-92.6%
  "sm80     forward    64        64          bf16,fp16  none,rotary  auto"
  "sm80     forward    128       64          bf16,fp16  none,rotary  auto"
  "sm80     backward   64        64          bf16,fp16  none,rotary  auto"
  "sm80     backward   128       64          bf16,fp16  none,rotary  auto"
  "sm80     forward    64        32          bf16,fp16  none,rotary  auto"
  "sm80     forward    128       32          bf16,fp16  none,rotary  auto"
  "sm80     backward   64        32          bf16,fp16  none,rotary  auto"
  "sm80     backward   128       32          bf16,fp16  none,rotary  auto"
  # 128-token blocks: eight warps per tile; past D = 64 the backward takes dK
  # and dV in two column passes, so its rotary epilogue is not built there.
  "sm80     forward    64        128         bf16,fp16  none,rotary  auto"
  "sm80     forward    128       128         bf16,fp16  none,rotary  auto"
  "sm80     backward   64        128         bf16,fp16  none,rotary  auto"
  "sm80     backward   128       128         bf16,fp16  none         auto"
  # The sm90 forward and backward share each 128-token tile between their two
  # consumer warpgroups (the forward's ForwardConfig::kTileConsumers, but with
  # rotary; sm90/shared_tile_backward.cuh). The forward, H200, % of copy (session 50):
  # headline-d64 102-105 vs sm80's 65-67, headline-d128 103-105 vs 75-76;
  # on the H100 not yet measured (sm80 read 92.2 and 98.1 there). With
  # rotary at D = 64 3.10 vs sm80's 3.54 ms (headline-d64, fp32 tables);
  # at D = 128 the table rows staged by TMA make it faster with 16-bit
  # tables, 2.60-2.66 vs 2.99-3.04 ms, and not with fp32 ones, 3.24 vs
  # 3.00-3.02 (headline-d128, H200, one run; docs/perf.md "Session 51").
  "sm90     forward    64        128         bf16,fp16  none,rotary  auto"
  "sm90     forward    128       128         bf16,fp16  none         auto"
  "sm90     forward    128       128         bf16,fp16  rotary       16-bit-tables"
  "sm90     backward   64        128         bf16,fp16  none,rotary  auto"
  "sm90     backward   128       128         bf16,fp16  none,rotary  auto"
  # Every other multiple of 32 up to 256. Past 128 the backward computes dK
  # and dV in two column passes, and the rotary epilogue (whole rows) is not
  # built there.
  "sm80     forward    32        64          bf16,fp16  none,rotary  auto"
  "sm80     forward    96        64          bf16,fp16  none,rotary  auto"
  "sm80     forward    160       64          bf16,fp16  none,rotary  auto"
  "sm80     forward    192       64          bf16,fp16  none,rotary  auto"
  "sm80     forward    224       64          bf16,fp16  none,rotary  auto"
  "sm80     forward    256       64          bf16,fp16  none,rotary  auto"
  "sm80     backward   32        64          bf16,fp16  none,rotary  auto"
  "sm80     backward   96        64          bf16,fp16  none,rotary  auto"
  "sm80     backward   160       64          bf16,fp16  none         auto"
  "sm80     backward   192       64          bf16,fp16  none         auto"
  "sm80     backward   224       64          bf16,fp16  none         auto"
  "sm80     backward   256       64          bf16,fp16  none         auto"
)

# The dense forward (include/blockattn/dense.h): one row per (backend, head
# dim); each kernel is built causal and non-causal. The sm80 kernels are the
# correct-everywhere fallback, not tuned (docs/perf.md, "Dense forward").
#
#  backend  head_dim  dtypes     automatic
set(BLOCKATTN_DENSE_KERNEL_TABLE
  "sm90     64        bf16,fp16  auto"
  "sm90     128       bf16,fp16  auto"
  "sm90     256       bf16,fp16  auto"
  "sm80     64        bf16,fp16  auto"
  "sm80     128       bf16,fp16  auto"
  "sm80     256       bf16,fp16  auto"
)
