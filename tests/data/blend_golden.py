"""Golden values of tests/data/blend_test.cc: a plain Python transcription of Megatron-LM's
blend sizing (blended_megatron_dataset_builder.py, _get_size_per_split_per_dataset) and order
(helpers.cpp, build_blending_indices). Not run by the build; run `python3 blend_golden.py` and
paste its output into the test when the cases change. Below 8 weights numpy.sum adds in order,
as sum() does here.
"""
import math


def normalize(weights):
    total = 0.0
    for w in weights:
        total += w
    return [w / total for w in weights]


def sizes(weights, target, surplus=0.005):
    planned = [int(math.ceil(target * w)) for w in weights]
    requested = [int(math.ceil(math.ceil(target * w) * (1 + surplus))) for w in weights]
    return planned, requested, sum(planned)


def blending_indices(weights, size):
    counts = [0] * len(weights)
    dataset_index, dataset_sample_index = [], []
    for i in range(size):
        x = max(float(i), 1.0)
        best, best_error = 0, weights[0] * x - counts[0]
        for d in range(1, len(weights)):
            error = weights[d] * x - counts[d]
            if error > best_error:
                best, best_error = d, error
        dataset_index.append(best)
        dataset_sample_index.append(counts[best])
        counts[best] += 1
    return dataset_index, dataset_sample_index


for raw, target in [([3, 2, 5], 20), ([0.3, 0.7], 1000), ([1, 1, 1], 7)]:
    w = normalize(raw)
    planned, requested, size = sizes(w, target)
    index, sample = blending_indices(w, size)
    print(raw, target, "weights", [repr(x) for x in w])
    print("  planned", planned, "requested", requested, "blend size", size)
    print("  dataset_index", index[:40])
    print("  dataset_sample_index", sample[:40])
