"""Variable-memory planning: GE's VarManager, VarMemAssignUtil and the variable passes.

The policy (op types, alignment, logic bases, reuse rules, trans ops) is data in
rules/ge/variables.yaml; see `policy.load_policy`.
"""
from engine.varmgr.desc import InitValue, TensorDesc
from engine.varmgr.manager import VarManager, VarManagerPool
from engine.varmgr.records import (Assignment, BroadcastInfo, Status, TransNodeInfo, VarAddr, VarDevAddr,
    VarError, VarOp)

__all__ = ["InitValue", "TensorDesc", "VarManager", "VarManagerPool", "Assignment",
           "BroadcastInfo", "Status", "TransNodeInfo", "VarAddr", "VarDevAddr", "VarError", "VarOp"]
