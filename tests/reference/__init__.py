"""The numpy reference model of DeepSeek-V4.1 (MODEL.md §3–§8): the oracle flashkv is measured against.

See tests/reference/README.md. The arrays are small; BLAS threads would only contend for the CI machine's cores
(and make timings erratic), so the reference asks for one unless the caller chose otherwise.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
