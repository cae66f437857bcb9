"""Running a sweep: the Hydra sweeper, Ray Tune's loop and its searcher and callback, one trial in
a Ray worker, clusters, faults and resume. The adaptors between the search and Ray and Hydra."""
