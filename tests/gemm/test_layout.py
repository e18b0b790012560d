"""course.gemm.layout: which operands TMA can read, which are copied into aligned rows, and which
strides need 64-bit offsets."""

import torch
from gemm_cases import randn

import course  # noqa: F401  (decides GPU or interpreter before any kernel is defined)
from course.gemm import layout as gemm_layout


def test_aligned_copy_keeps_values_and_layout():
    for name, t in {"row-major": randn(5, 9), "transposed": randn(11, 9).T,
                    "every third column": randn(6, 33)[:, ::3]}.items():
        c = gemm_layout.aligned_copy(t)
        assert c.shape == t.shape and torch.equal(c, t), name
        pitch = c.stride(1) if c.stride(0) == 1 else c.stride(0)  # elements between rows as stored
        # (a row starts every 128 bytes from the buffer's start; CUDA's allocator aligns that to 512)
        assert pitch * c.element_size() % 128 == 0 and c.data_ptr() % 16 == 0, f"{name}: rows not 128-byte aligned"
        assert (c.stride(0) == 1) == (name == "transposed"), f"{name}: stored the other way round"
        assert gemm_layout.tma_layout(c) is not None, f"{name}: TMA still cannot read the copy"


def test_copies_only_operands_tma_cannot_read_where_the_work_pays_for_them():
    from course.bench import shape_set

    meta = lambda *shape: torch.empty(*shape, dtype=torch.bfloat16, device="meta")  # noqa: E731
    for name, M, N, K in shape_set(quick=False):  # the benchmark's operands are all aligned
        assert gemm_layout.aligned_copies_for(meta(M, K), meta(N, K).T, meta(M, N)) == (False,) * 3, name
    # K = 4014, N = 4785: rows of 8028 and 9570 bytes (no multiple of 16)
    assert gemm_layout.aligned_copies_for(meta(4096, 4014), meta(4785, 4014).T, meta(4096, 4785)) == (True,) * 3
    # decode copies its weights too: 2-byte pointer loads cost far more than a copy
    assert gemm_layout.aligned_copies_for(meta(16, 4014), meta(4785, 4014).T, meta(16, 4785)) == (True,) * 3
    # too little work per element for A and B (N = 9, M = 8 < MACS_PER_COPIED_ELEMENT)
    assert gemm_layout.aligned_copies_for(meta(8, 4014), meta(9, 4014).T, meta(8, 9)) == (False, False, True)
    # rows under 16 bytes stay unreadable by TMA, copied or not
    assert gemm_layout.aligned_copies_for(meta(300, 7), meta(7, 300), meta(300, 300)) == (False,) * 3
    # rows of 6000 bytes (K = 3000), 16 bytes into a sector: TMA reads them, slowly; B is copied where the
    # product does at least MACS_PER_REALIGNED_ELEMENT multiply-adds per element of B (M), A where it does
    # REALIGNED_A_FACTOR times as many per element of A (N) too
    assert gemm_layout.aligned_copies_for(meta(8000, 3000), meta(8000, 3000).T, meta(8000, 8000)) == (False, True, False)
    assert gemm_layout.aligned_copies_for(meta(2048, 3000), meta(2048, 3000).T, meta(2048, 2048)) == (False,) * 3
    # C's rows off a sector are written once by the TMA store: never realigned (rows 7952 bytes apart)
    assert gemm_layout.aligned_copies_for(meta(4104, 4096), meta(3976, 4096).T, meta(4104, 3976)) == (False,) * 3
    # the thresholds: M = 2560 for B, and N = 4 x 2560 for A; one row or column less is under them
    assert gemm_layout.aligned_copies_for(meta(2560, 1000), meta(4096, 1000).T, meta(2560, 4096)) == (False, True, False)
    assert gemm_layout.aligned_copies_for(meta(2559, 1000), meta(4096, 1000).T, meta(2559, 4096)) == (False,) * 3
    assert gemm_layout.aligned_copies_for(meta(2560, 1000), meta(10240, 1000).T, meta(2560, 10240)) == (True, True, False)
    assert gemm_layout.aligned_copies_for(meta(2560, 1000), meta(10239, 1000).T, meta(2560, 10239)) == (False, True, True)
    # decode: a product this short never pays for a realigned copy
    assert gemm_layout.aligned_copies_for(meta(16, 4104), meta(14336, 4104).T, meta(16, 14336)) == (False,) * 3
    # rows of 4000 bytes start on sectors (32-byte multiples): read at nearly full speed, never copied
    assert gemm_layout.aligned_copies_for(meta(8192, 2000), meta(8192, 2000).T, meta(8192, 8192)) == (False,) * 3


def test_aligned_copies_move_whole_words_and_keep_every_value():
    # rows of 8208, 2000, 1028 and 8190 bytes: copied in words of 16, 16, 4 and 2 bytes; views that start
    # one element into their rows copy in 2-byte words
    base = torch.randn(40, 4112, dtype=torch.bfloat16)
    for t in (base[:, :4104], base[:, :1000], base[:, :514], base[:, :4095], base[:, 1:4105], base[:, :1000].T,
              base[:, ::3], base[::2, ::8]):  # and rows that are not contiguous: element by element
        copy = gemm_layout.aligned_copy(t)
        assert torch.equal(copy.view(torch.int16), t.view(torch.int16)), t.shape  # bit for bit, NaNs too
        assert gemm_layout.stored_transposed(copy) == gemm_layout.stored_transposed(t)
        assert max(copy.stride()) * 2 % 128 == 0


def test_wide_strides_only_where_offsets_reach_2_31():
    s = dict(am=64, ak=1, bk=32, bn=1, cm=32, cn=1, sa=1, sb=1, bias=1)
    assert gemm_layout.wide_strides(100, 32, 64, s, 16) == 0
    assert gemm_layout.wide_strides(3, 5, 20, dict(s, am=2**30), 16) == 1  # A's rows 2^30 apart: stride_am
    assert gemm_layout.wide_strides(3, 5, 20, dict(s, bk=1, bn=2**30), 16) == 8  # K-major B, columns far apart
    assert gemm_layout.wide_strides(3, 5, 20, dict(s, cm=2**30), 16) == 16
    assert gemm_layout.wide_strides(3, 5, 20, dict(s, sa=2**30, sb=2**30, bias=2**30), 16) == 64 | 128 | 256
    # the masked K step past K - 1 counts: 2^31 - 1 is reached only with the padding
    assert gemm_layout.wide_strides(3, 5, 2**20 - 1000, dict(s, ak=2**11, am=1), 16) == 2
