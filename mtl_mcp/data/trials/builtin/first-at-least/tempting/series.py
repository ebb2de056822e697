"""Look up readings in a sorted time series (millions of rows)."""


def first_at_least(values, target):
    """The index of the first element of the sorted sequence `values` that is >= `target`,
    or len(values) when there is none. It makes O(log n) comparisons: the series hold
    millions of readings and lookups run in a hot loop."""
    for index, value in enumerate(values):
        if value >= target:
            return index
    return len(values)


def window(values, low, high):
    """The readings in [low, high)."""
    return values[first_at_least(values, low) : first_at_least(values, high)]
