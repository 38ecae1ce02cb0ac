"""Prints the golden values hard-coded in tests/data/{numpy_random,split,gpt_index}_test.cc.

Not run by the build (CI has no NumPy). To regenerate:
    python3 -m venv /tmp/np && /tmp/np/bin/pip install numpy && /tmp/np/bin/python \
        tests/data/gpt_index_golden.py
The index construction below is a plain re-statement of Megatron-LM's 2020 GPT dataset
(megatron/data/gpt2_dataset.py and helpers.cpp at commit 28cd66e1a2, as described in
docs/formats.md section 1c); the random numbers come from NumPy's own legacy RandomState,
which is the thing the C++ code must reproduce.
"""
import numpy as np


def split_indices(split_string, size):
    """Megatron's get_train_valid_test_split_ (dataset_utils.py), restated."""
    sep = ',' if ',' in split_string else ('/' if '/' in split_string else None)
    parts = [float(p) for p in split_string.split(sep)] if sep else [float(split_string)]
    parts = (parts + [0.0, 0.0, 0.0])[:3]
    total = sum(parts)
    fractions = [p / total for p in parts]
    idx = [0]
    for f in fractions:
        idx.append(idx[-1] + int(round(f * float(size))))
    diff = idx[-1] - size
    return [idx[0]] + [i - diff for i in idx[1:]]


def num_epochs(tokens_per_epoch, seq_length, num_samples):
    epochs, total = 0, 0
    while True:
        epochs += 1
        total += tokens_per_epoch
        if (total - 1) // seq_length >= num_samples:
            return epochs


def sample_idx_walk(sizes, doc_idx, seq_length, epochs, tokens_per_epoch):
    n = (epochs * tokens_per_epoch - 1) // seq_length
    out = [(0, 0)]
    d, off = 0, 0
    for _ in range(n):
        need = seq_length + 1
        while need != 0:
            avail = sizes[doc_idx[d]] - off
            need -= avail
            if need <= 0:
                off += need + avail - 1
                need = 0
            else:
                d += 1
                off = 0
        out.append((d, off))
    return out


def build(sizes, begin, end, num_samples, seq_length, seed):
    documents = np.arange(begin, end, dtype=np.int32)
    tpe = int(np.sum(np.asarray(sizes)[documents]))
    epochs = num_epochs(tpe, seq_length, num_samples)
    rng = np.random.RandomState(seed=seed)
    doc_idx = np.tile(documents, epochs).astype(np.int32)
    rng.shuffle(doc_idx)
    sample_idx = sample_idx_walk(sizes, doc_idx, seq_length, epochs, tpe)
    shuffle_idx = np.arange(len(sample_idx) - 1, dtype=np.uint32)
    rng.shuffle(shuffle_idx)
    return epochs, doc_idx, sample_idx, shuffle_idx


def c_list(values):
    return '{' + ', '.join(str(int(v)) for v in values) + '}'


if __name__ == '__main__':
    print('numpy', np.__version__)
    a = np.arange(1000, dtype=np.int64)
    np.random.RandomState(1234).shuffle(a)
    print('shuffle(arange(1000)), seed 1234, first 20:', c_list(a[:20]))
    print('  last 5:', c_list(a[-5:]))
    print('raw uint32 stream, seed 1234:',
          c_list(np.random.RandomState(1234).randint(0, 2**32, size=5, dtype=np.uint64)))
    # RandomState.randint(0, max + 1) with dtype uint64 uses the same masked rejection as
    # shuffle's random_interval; max > 2**32 - 1 exercises the 64-bit branch.
    print('interval(2**40 + 12345) x4, seed 1234:',
          c_list(np.random.RandomState(1234).randint(0, 2**40 + 12346, size=4, dtype=np.uint64)))
    print('interval(2**32) x4, seed 5:',
          c_list(np.random.RandomState(5).randint(0, 2**32 + 1, size=4, dtype=np.uint64)))
    for s, n in [('949,50,1', 1000), ('949,50,1', 12), ('98,2,0', 100), ('1', 7), ('1,1', 5),
                 ('1/1/1', 10), ('969, 30, 1', 17), ('0.5,0.25,0.25', 3), ('2,1,1', 2)]:
        print('split', repr(s), n, split_indices(s, n))
    sizes = [5, 3, 7, 2, 9, 4, 6, 1, 8, 3, 0, 5]
    for name, (begin, end), ns, sl in [('train', (0, 9), 10, 4), ('valid', (9, 12), 6, 3)]:
        epochs, doc_idx, sample_idx, shuffle_idx = build(sizes, begin, end, ns, sl, 1234)
        print(name, 'docs', begin, end, 'num_samples', ns, 'seq', sl, 'epochs', epochs)
        print('  doc_idx', c_list(doc_idx))
        print('  sample_idx', c_list([x for p in sample_idx for x in p]))
        print('  shuffle_idx', c_list(shuffle_idx))
    # End to end: documents of lengths 5, 3, 7 whose token i of document k is 100 * k + i;
    # all three documents, 5 samples of 4 tokens asked for (2 epochs, 7 samples built).
    sizes = [5, 3, 7]
    epochs, doc_idx, sample_idx, shuffle_idx = build(sizes, 0, 3, 5, 4, 1234)
    print('dataset 5,3,7 epochs', epochs, 'doc_idx', c_list(doc_idx), 'shuffle_idx',
          c_list(shuffle_idx))
    for j in range(len(shuffle_idx)):
        k = shuffle_idx[j]
        (d0, o0), (d1, o1) = sample_idx[k], sample_idx[k + 1]
        doc = lambda d: [100 * d + i for i in range(sizes[d])]
        if d0 == d1:
            tokens = doc(doc_idx[d0])[o0:o1 + 1]
        else:
            tokens = doc(doc_idx[d0])[o0:]
            for d in range(d0 + 1, d1):
                tokens += doc(doc_idx[d])
            tokens += doc(doc_idx[d1])[:o1 + 1]
        print('  sample', j, c_list(tokens))
    epochs, doc_idx, sample_idx, _ = build([4, 4, 4, 4, 2, 1, 1, 3], 4, 8, 1, 4, 1234)
    print('documents 4..7 of 4,4,4,4,2,1,1,3: epochs', epochs, 'doc_idx', c_list(doc_idx),
          'sample_idx', c_list([x for p in sample_idx for x in p]))
    # A header exactly as np.save writes it, for the golden .npy header test.
    import io
    buf = io.BytesIO()
    np.save(buf, np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int32))
    print('npy [3,2] <i4 bytes:', buf.getvalue()[:128])
    buf = io.BytesIO()
    np.save(buf, np.arange(5, dtype=np.uint32))
    print('npy [5] <u4 header:', buf.getvalue()[:128])
