"""The options the questions of answers.py offer (given: answer with these very strings)."""

BANDWIDTH_OPTIONS = (
    "HBM3",
    "L2 cache",
    "InfiniBand NDR port",
    "shared memory (all SMs)",
    "PCIe Gen5 x16",
    "register files (all SMs)",
    "NVLink 4 (all links)",
)

PER_SM_OPTIONS = (
    "register file",
    "L2 cache",
    "warp schedulers",
    "tensor cores",
    "HBM memory controllers",
    "L1 / shared memory",
    "copy engines (DMA)",
    "GigaThread engine (block scheduler)",
)

NVCC_OPTIONS = (
    "ptxas: PTX to SASS",
    "host compiler (gcc) builds the host code",
    "cicc: NVVM IR to PTX",
    "cudafe++: splits host and device code",
    "fatbinary: packs SASS and PTX",
    "C preprocessor",
)
