// SegmentRange: a contiguous range of a model's cut-point segments (see pipeline/cut_point.h).
#ifndef VARUNA_PIPELINE_SEGMENT_RANGE_H_
#define VARUNA_PIPELINE_SEGMENT_RANGE_H_

namespace varuna {

// A contiguous range of segments [first, last], both inclusive.
struct SegmentRange {
  int first = 0;
  int last = 0;

  int size() const { return last - first + 1; }
  bool Contains(int segment) const { return segment >= first && segment <= last; }
  bool operator==(const SegmentRange& other) const {
    return first == other.first && last == other.last;
  }
};

}  // namespace varuna

#endif  // VARUNA_PIPELINE_SEGMENT_RANGE_H_
