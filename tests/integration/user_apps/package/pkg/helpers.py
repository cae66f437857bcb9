def double(x: float) -> float:
    return 2.0 * x
