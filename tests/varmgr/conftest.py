import pytest

from engine.varmgr import TensorDesc, VarManagerPool
from engine.varmgr.policy_load import default_policy

GiB = 2 ** 30
HBM, RDMA, HOST, RESERVED = 2, 3, 129, 256
NCHW, NHWC, ND, NC1HWC0 = 0, 1, 2, 3
FLOAT, FLOAT16, INT32, UINT8, COMPLEX64 = 0, 1, 3, 4, 16


@pytest.fixture
def pool():
    """GE's fixture destroys the pool before and after each test: a fresh pool each time."""
    p = VarManagerPool(default_policy())
    yield p
    p.destroy()


def desc(dims=(), fmt=ND, dtype=FLOAT, size=0, **kw) -> TensorDesc:
    return TensorDesc(format=fmt, dtype=dtype, dims=tuple(dims), size=size, **kw)
