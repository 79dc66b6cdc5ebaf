"""engine/report/jsontext.py writes what json.dumps(indent=N, ensure_ascii=False) writes."""
import json
import math

import pytest

from engine.report.jsontext import indented

VALUES = [
    {},
    [],
    "top",
    7,
    None,
    {"a": [], "b": {}, "c": [[], {}], "d": [1, [2, [3, {"e": {"f": []}}]]]},
    {"ünï\u2028": "→ \"quoted\" \\ \n\t\x00 \ud7ff", "k": ["é", "日本", "\U0001F600"]},
    {"b": True, "f": False, "n": None, "i": -12, "big": 2 ** 70, "x": 1.5, "nan": math.nan, "inf": -math.inf},
    {1: "int key", 2.5: "float key", True: "bool key", None: "none key"},
    [(1, 2), ("t",), [True, False, None, 0.1]],
    [{"runs": [{"results": [{"ruleId": f"r{k}", "locations": [{"region": {"startLine": k}}]} for k in range(5000)]}]}],
]


@pytest.mark.parametrize("indent", [1, 2])
@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_indented_is_json_dumps_byte_for_byte(value, indent):
    assert indented(value, indent) == (json.dumps(value, indent=indent, ensure_ascii=False) + "\n").encode()


def test_indented_refuses_what_json_refuses():
    with pytest.raises(TypeError):
        indented({"a": object()})
    with pytest.raises(TypeError):
        indented({(1, 2): "tuple key"})
