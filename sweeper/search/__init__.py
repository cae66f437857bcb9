"""The math of the search: the space and its grammar, designs, the GP and its kernels, warps and
checks, acquisition, and the ask/tell policy. Pure numpy/scipy: no Ray, Hydra or MLflow."""
