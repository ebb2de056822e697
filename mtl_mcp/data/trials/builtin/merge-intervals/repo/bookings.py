"""Merge booked time ranges for the calendar's busy view."""


def merge_intervals(intervals):
    """Merge overlapping or touching closed intervals [start, end] (start <= end), given in
    any order. Returns a new list of [start, end] lists sorted by start; the input is not
    changed."""
    merged = []
    for start, end in intervals:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = end
        else:
            merged.append([start, end])
    return merged
